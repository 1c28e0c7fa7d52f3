"""SegmentReader conformance: the shipped suite (tieredstore.testing.SegmentReaderTests)
run against the library's two readers, each over a MemoryObjectStore."""

from __future__ import annotations

from tieredstore.fetcher import Fetcher
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import DirectReader, SegmentReader
from tieredstore.testing import SegmentReaderTests


class TestDirectReader(SegmentReaderTests):
    async def make_reader(self, store: ObjectStore) -> SegmentReader:
        return DirectReader(store)


class TestFetcher(SegmentReaderTests):
    """The Fetcher with its default options (no disk tier); closed after each test."""

    async def make_reader(self, store: ObjectStore) -> SegmentReader:
        return Fetcher(store)
