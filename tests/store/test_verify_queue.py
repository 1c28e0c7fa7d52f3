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


STORE = "tieredstore/"  # the listing of every key of the store (the default key prefix)


def _flat_files(listed: Counter[str]) -> dict[str, int]:
    return {p: n for p, n in listed.items()
            if p.endswith(("/commitlog/", "/consumequeue/", "/index/"))}


@pytest.mark.parametrize("write_mode", ["log", "direct"])
async def test_verify_takes_every_segment_from_two_listings_of_the_store(
        write_mode: str) -> None:
    """The store is listed once after each load of the log (the first listing also
    finds the segments no metadata references): the consume queues from the
    first, the commit logs and key indexes from the second. No flat file, and
    no segment directory that holds objects, is listed on its own."""
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
    # Only a segment in the broker's log alone (a log-mode queue's newest) is
    # listed, once, and found empty.
    assert stored, listed
    assert not stored & set(segment_dirs), listed
    assert set(segment_dirs.values()) <= {1}, listed
    assert _flat_files(listed) == {}, listed
    assert listed[STORE] == 2, listed
    # The rest: the heads, the queue's head and its two metadata page lists, and
    # the broker's log twice (before the consume queue is listed, and before the
    # commit log).
    rest = sum(n for p, n in listed.items() if p not in segment_dirs and p != STORE)
    assert rest == 6, listed


async def test_verify_lists_a_queue_on_its_own_when_the_store_is_larger() -> None:
    """A second listing of a store that takes more pages than a LIST of each
    queue's commit log and key index is not made: those are listed on their own."""
    backend = MemoryObjectStore()
    await build(backend, "direct")
    for i in range(2 * 1000 + 1):  # another broker's segments: three pages more
        await backend.put(f"{STORE}ffff/default-cluster/broker-9/t/{i}/commitlog/"
                          f"seg-{0:020d}/chunk-{0:020d}", b"")
    listings = _Listings(backend)
    report = await verify_store(listings, small_config(gc_interval=0), topic="t", queue_id=0)
    assert report.error_count == 0, report.document()
    listed = Counter(listings.prefixes)
    assert listed[STORE] == 1, listed
    assert sorted(p.rsplit("/", 2)[1] for p in _flat_files(listed)) == ["commitlog", "index"]
    assert set(_flat_files(listed).values()) == {1}, listed


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
