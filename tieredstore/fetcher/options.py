"""FetcherOptions: the knobs of a :class:`~tieredstore.fetcher.Fetcher`, checked."""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore.errors import check_field
from tieredstore.sizes import MiB


@dataclass(frozen=True, slots=True)
class FetcherOptions:
    """How much a :class:`Fetcher` caches, reads ahead and reads at once.

    ``memory_bytes`` bounds the memory tier; ``readahead_chunk_num`` and
    ``readahead_chunk_max`` are the read-ahead window's base and cap in units;
    ``drop_behind`` drops a unit from memory once a sequential reader has
    read through it; ``read_concurrency`` bounds GETs in flight; read-ahead
    state is kept for the ``max_segments`` most recently read segments.
    """

    memory_bytes: int = 256 * MiB
    readahead_chunk_num: int = 2
    readahead_chunk_max: int = 8
    drop_behind: bool = True
    read_concurrency: int = 16
    max_segments: int = 4096

    def __post_init__(self) -> None:
        check_field("memory_cache_bytes", self.memory_bytes, 0)
        check_field("read_concurrency", self.read_concurrency, 1)
        check_field("readahead_chunk_num", self.readahead_chunk_num, 0, self.readahead_chunk_max,
                    bounds=f"[0, readahead_chunk_max={self.readahead_chunk_max}]")
        check_field("max_segments", self.max_segments, 1)
