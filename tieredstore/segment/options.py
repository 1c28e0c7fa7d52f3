"""SegmentOptions: how a segment writes and compacts (checked when built)."""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore.errors import check_field
from tieredstore.sizes import MiB


@dataclass(frozen=True, slots=True)
class SegmentOptions:
    """How a segment writes and compacts. ``unit_target`` defaults to ``chunk_size``.

    ``merged_metadata`` is user metadata added to the merged object's own
    (``tieredstore-format``), as ``(key, value)`` pairs. ``derived``: the
    segment's bytes can be rebuilt from another file's (a consume queue or a
    key index, from the commit log), so a writer may hold them back longer
    (the upload buffer pool's ``chunk_wait``). ``join_tail``: a commit's tail
    shorter than a chunk joins the chunk before it (one object of less than
    two chunks), so that no partial chunk, which a merge cannot copy under
    S3's part minimum, sits between two others; the message store's segments
    do, for the pool commits a chunk and the remainder a flush found behind
    it at once (``SegmentCommitter._keep``). Off: chunks of at most
    ``chunk_size``.
    """

    chunk_size: int = 8 * MiB
    max_size: int | None = None
    merge_on_seal: bool = True
    unit_target: int | None = None
    merge_concurrency: int = 4
    merged_metadata: tuple[tuple[str, str], ...] = ()
    derived: bool = False
    join_tail: bool = False

    def __post_init__(self) -> None:
        for key in ("chunk_size", "max_size", "merge_concurrency"):
            check_field(key, getattr(self, key), 1, optional=key == "max_size")

    @property
    def units(self) -> int:
        return self.unit_target or self.chunk_size
