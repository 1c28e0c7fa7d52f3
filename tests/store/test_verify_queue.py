"""verify_queue, the one verifier: every message and CRC checked, damage named
by offset, and the queue's segments counted as ``inspect`` and Spark's ``stats``
count them (QueueSummary.segments), on an intact and on a damaged store."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from tests.store.conftest import small_config
from tests.store.test_damage import COUNT, build, flip
from tieredstore.objectstore import ByteRange, MemoryObjectStore, ObjectData, ObjectInfo
from tieredstore.store import summarize, verify_queue, verify_store
from tieredstore.testing import ForwardingObjectStore


async def test_verify_queue_checks_every_message_and_counts_the_segments_once() -> None:
    backend = MemoryObjectStore()
    await build(backend)
    config = small_config(gc_interval=0)
    check = await verify_queue(backend, config, "t", 0)
    summary = await summarize(backend, config, "t", 0, timestamps=False)
    assert check.errors == []
    assert (check.min_offset, check.max_offset, check.messages) == (0, COUNT, COUNT)
    assert check.segments == summary.segments > 3  # sealed ones, and the active ones
    assert check.units > 0 and check.bytes > 0

    merged = sorted(o.key for o in await backend.list_all("")
                    if "/commitlog/" in o.key and o.key.endswith("/segment"))
    await flip(backend, merged[1], 100)
    damaged = await verify_queue(backend, config, "t", 0)
    assert damaged.segments == summary.segments  # the same segments, damaged or not
    assert len(damaged.errors) == 1, damaged.errors
    found = re.match(r"t/0: (?:offset (\d+)|offsets \[(\d+), (\d+)\)): .*CRC32C",
                     damaged.errors[0])
    assert found, damaged.errors
    bad = 1 if found.group(1) else int(found.group(3)) - int(found.group(2))
    assert damaged.messages == COUNT - bad


class _Listings(ForwardingObjectStore):
    """Notes the prefix of every LIST."""

    def __init__(self, inner: MemoryObjectStore) -> None:
        super().__init__(inner)
        self.prefixes: list[str] = []

    def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        self.prefixes.append(prefix)
        return super().list_pages(prefix)


@pytest.mark.parametrize("write_mode", ["log", "direct"])
async def test_verify_lists_each_flat_file_once_and_no_segment_directory_again(write_mode: str) -> None:
    backend = MemoryObjectStore()
    await build(backend, write_mode)
    listings = _Listings(backend)
    before = backend.metrics.total_requests("list")
    report = await verify_store(listings, small_config(gc_interval=0))
    assert report.error_count == 0
    assert backend.metrics.total_requests("list") - before == len(listings.prefixes)
    stored = {o.key.rsplit("/", 1)[0] + "/" for o in await backend.list_all("")
              if "/seg-" in o.key}
    listed = Counter(listings.prefixes)
    segment_dirs = {p: n for p, n in listed.items() if "/seg-" in p}
    # No segment directory with objects listed again: its flat file's listing
    # holds its objects. Only a segment in the broker's log alone (a log-mode
    # queue's newest) is listed, once, and found empty.
    assert stored, listed
    assert not stored & set(segment_dirs), listed
    assert set(segment_dirs.values()) <= {1}, listed
    flat_files = [p for p in listed if p.endswith(("/commitlog/", "/consumequeue/", "/index/"))]
    assert sorted(listed[p] for p in flat_files) == [1, 1, 1], listed
    # The rest: the bucket's queues (one LIST of it), the heads, the queue's head and
    # its two metadata page lists, and the broker's log three times (before the
    # consume queue is listed, before the commit log, and for the orphan check).
    rest = sum(n for p, n in listed.items() if p not in segment_dirs and p not in flat_files)
    assert rest == 8, listed


class _TornOnce(ForwardingObjectStore):
    """The first GET of each commit-log chunk comes back with a byte changed:
    damage on the way, not in the bucket."""

    def __init__(self, inner: MemoryObjectStore) -> None:
        super().__init__(inner)
        self.torn: list[str] = []

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        got = await super().get_object(key, byte_range)
        if "/commitlog/" not in key or "/chunk-" not in key or key in self.torn:
            return got
        self.torn.append(key)
        data = bytearray(got.data)
        data[len(data) // 2] ^= 0x01
        return ObjectData(bytes(data), got.info)


@pytest.mark.parametrize("write_mode", ["log", "direct"])
async def test_a_read_damaged_on_the_way_is_read_again_once_and_verifies(
        write_mode: str, caplog: pytest.LogCaptureFixture) -> None:
    backend = MemoryObjectStore()
    await build(backend, write_mode)
    torn = _TornOnce(backend)
    check = await verify_queue(torn, small_config(gc_interval=0), "t", 0)
    assert torn.torn, "no commit-log chunk was read"
    assert check.errors == []
    assert check.messages == COUNT
    again = [r for r in caplog.records if "read again after a failed check" in r.message]
    assert len(again) == len(torn.torn), [r.message for r in again]
