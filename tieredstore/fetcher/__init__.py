"""The read path: memory and disk tiers, in-flight coalescing, read-ahead.

:class:`Fetcher` implements :class:`tieredstore.segment.SegmentReader`; give it
to a segment (``ChunkedSegment.open(..., reader=fetcher)``). It orchestrates
parts that each do one thing:

- ``memory``: :class:`MemoryTier`, the units in memory and every index about
  them (segment, unread prefetches, committed units, drop-behind), over a
  :class:`~tieredstore.lru.LRU` weighing bytes; pure, no IO.
- ``disk``: :class:`DiskTier`, checked units kept across restarts.
- ``generations``: :class:`DiskGenerations`, which disk work of a segment
  predates its last ``forget`` (so none of it is served after); pure.
- ``loads``: :class:`LoadRegistry`, loads in flight (one per unit), GET
  limits, background tasks.
- ``readahead``: :class:`ReadAheadWindow` per segment
  (:class:`ReadAheadWindows`); pure.
- ``stats``: :class:`FetcherMetrics`.
"""

from tieredstore.fetcher.disk import (
    CorruptEntry,
    DiskTier,
    DiskTierUnavailable,
    Lookup,
    decode_entry,
    encode_entry,
)
from tieredstore.fetcher.fetcher import Fetcher, unit_key
from tieredstore.fetcher.generations import DiskGenerations
from tieredstore.fetcher.options import FetcherOptions
from tieredstore.fetcher.readahead import ReadAheadWindow

__all__ = [
    "CorruptEntry",
    "DiskGenerations",
    "DiskTier",
    "DiskTierUnavailable",
    "Fetcher",
    "FetcherOptions",
    "Lookup",
    "ReadAheadWindow",
    "decode_entry",
    "encode_entry",
    "unit_key",
]
