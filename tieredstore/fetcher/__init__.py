"""The read path: memory and disk tiers, in-flight coalescing, read-ahead.

:class:`Fetcher` implements :class:`tieredstore.segment.SegmentReader`; give it
to a segment (``ChunkedSegment.open(..., reader=fetcher)``). The cache
policies (:class:`MemoryLRU`, :class:`ReadAheadWindow`) are pure and do no IO.
"""

from tieredstore.fetcher.disk import CorruptEntry, DiskTier, Lookup, decode_entry, encode_entry
from tieredstore.fetcher.fetcher import Fetcher, UnitKey, unit_key
from tieredstore.fetcher.lru import MemoryLRU
from tieredstore.fetcher.readahead import ReadAheadWindow
from tieredstore.fetcher.stats import READ_SECONDS_BUCKETS, FetcherMetrics, Source

__all__ = [
    "READ_SECONDS_BUCKETS",
    "CorruptEntry",
    "DiskTier",
    "Fetcher",
    "FetcherMetrics",
    "Lookup",
    "MemoryLRU",
    "ReadAheadWindow",
    "Source",
    "UnitKey",
    "decode_entry",
    "encode_entry",
    "unit_key",
]
