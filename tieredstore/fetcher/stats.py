"""FetcherMetrics: what the read path served, from where, and what it cost.

Plain counters, updated on the event loop's thread only; a reader on another
thread (a Prometheus scrape) sees each counter whole, if not all of them at
the same instant.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field
from typing import Any

# Upper bounds of the read latency histogram, in seconds: from memory hits
# (tens of microseconds) to slow object-store GETs.
READ_SECONDS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                        0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class Source(enum.Enum):
    """Where a unit's bytes came from."""

    MEMORY = "memory"
    DISK = "disk"
    STORE = "store"


@dataclass(slots=True)
class FetcherMetrics:
    """Counters of one fetcher. Units are counted per unit a read needs."""

    reads: int = 0
    memory_hits: int = 0
    memory_misses: int = 0
    disk_hits: int = 0
    disk_misses: int = 0
    disk_corrupt: int = 0  # entries that failed their checks: deleted, refetched
    disk_errors: int = 0  # lookups that failed (served from the store instead)
    disk_writes: int = 0
    disk_write_errors: int = 0
    store_gets: int = 0  # units fetched from the object store, for reads and prefetch
    store_bytes: int = 0
    span_gets: int = 0  # ranged GETs of a few records' bytes (read_span), not cached
    coalesced_waits: int = 0  # reads that joined a load already in flight
    readahead_hits: int = 0  # prefetched units later read
    prefetch_units: int = 0  # prefetch loads started
    prefetch_skipped: int = 0  # window units left out to stay in the memory budget
    prefetch_waste: int = 0  # prefetched units evicted or forgotten unread
    prefetch_errors: int = 0
    dropped_behind: int = 0  # units a sequential reader finished, dropped from memory
    committed_units: int = 0
    committed_bytes: int = 0
    carried_units: int = 0  # merged units built from the chunks held (no GET)
    bytes_from_memory: int = 0  # bytes returned to readers, by where their unit came from
    bytes_from_disk: int = 0
    bytes_from_store: int = 0
    read_seconds_buckets: list[int] = field(
        default_factory=lambda: [0] * (len(READ_SECONDS_BUCKETS) + 1)
    )
    read_seconds_sum: float = 0.0
    # bytes returned to readers by topic and source: (topic, source) -> bytes
    bytes_by_topic: dict[tuple[str, Source], int] = field(default_factory=dict)

    def served(self, source: Source, nbytes: int, topic: str) -> None:
        """``nbytes`` returned to a reader of ``topic``, from ``source``."""
        key = (topic, source)
        self.bytes_by_topic[key] = self.bytes_by_topic.get(key, 0) + nbytes
        if source is Source.MEMORY:
            self.bytes_from_memory += nbytes
        elif source is Source.DISK:
            self.bytes_from_disk += nbytes
        else:
            self.bytes_from_store += nbytes

    def observe_read(self, seconds: float) -> None:
        self.reads += 1
        self.read_seconds_sum += seconds
        # The first bucket whose bound is >= seconds; past the last: the slower ones.
        self.read_seconds_buckets[bisect.bisect_left(READ_SECONDS_BUCKETS, seconds)] += 1

    @property
    def bytes_from_cache(self) -> int:
        return self.bytes_from_memory + self.bytes_from_disk

    def snapshot(self) -> dict[str, Any]:
        """Every counter by name, and the read latency histogram (per bucket)."""
        out: dict[str, Any] = {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if name not in ("read_seconds_buckets", "read_seconds_sum", "bytes_by_topic")
        }
        by_topic: dict[str, dict[str, int]] = {}
        for (topic, source), n in list(self.bytes_by_topic.items()):
            by_topic.setdefault(topic, {})[source.value] = n
        out["bytes_by_topic"] = by_topic
        out["bytes_from_cache"] = self.bytes_from_cache
        out["read_seconds"] = {
            "bounds": list(READ_SECONDS_BUCKETS),
            "counts": list(self.read_seconds_buckets),
            "sum": self.read_seconds_sum,
        }
        return out
