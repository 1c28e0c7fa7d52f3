"""Reading by tag: the consume queue's tag hashes decide, and the commit log is read
for the matching messages only (counted in bytes and GETs)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.store.conftest import KiB, small_config
from tieredstore.errors import InvalidArgument, InvalidArgumentType
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore, ReadOnlyMessageStore
from tieredstore.testing import ForwardingObjectStore

COUNT = 2000
RARE_EVERY = 100


class _Reads(ForwardingObjectStore):
    """Counts the GETs and bytes read of commit-log objects, but for the reads of
    merged objects' trailers (their unit tables, read once per segment opened)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.gets = self.bytes = 0

    async def get_object(self, key: str, byte_range: Any = None) -> Any:
        got = await super().get_object(key, byte_range)
        trailer = key.endswith("/segment") and byte_range is not None and \
            byte_range.start + byte_range.length >= got.info.size
        if "/commitlog/" in key and not trailer:
            self.gets += 1
            self.bytes += len(got.data)
        return got


def tag_of(i: int) -> str | None:
    if i % RARE_EVERY == 7:
        return "rare"
    return None if i % 10 == 3 else ("odd" if i % 2 else "even")


def body(i: int) -> bytes:
    return f"{i:05d}".encode() * 100


CONFIG: dict[str, Any] = {"chunk_size": 64 * KiB, "commit_log_max_size": 512 * KiB,
                          "pool_bytes": 1024 * KiB, "gc_interval": 0}


async def build() -> MemoryObjectStore:
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(small_config(**CONFIG), store=backend)
    for i in range(COUNT):
        await store.append("t", 0, body(i), tags=tag_of(i))
    await store.close()
    return backend


async def read_by_tags(reader: ReadOnlyMessageStore | AsyncMessageStore, tags: Any,
                       **kwargs: Any) -> list[int]:
    offsets: list[int] = []
    at = 0
    while at < COUNT:
        got = await reader.get_by_tags("t", 0, at, tags, **kwargs)
        assert got.next_offset > at
        offsets += [m.offset for m in got.messages]
        assert all(m.body == body(m.offset) and m.tags in (
            {tags} if isinstance(tags, str) else set(tags)) for m in got.messages)
        at = got.next_offset
    return offsets


async def test_a_rare_tag_reads_only_its_records_from_the_commit_log() -> None:
    backend = _Reads(await build())
    config = small_config(**CONFIG)
    async with await AsyncMessageStore.open_read_only(config, store=backend) as reader:
        offsets = await read_by_tags(reader, "rare")
    rare = [i for i in range(COUNT) if tag_of(i) == "rare"]
    assert offsets == rare
    record = len(body(0)) + 200  # body, framing, tags: generous
    # one ranged GET per record, two for one that crosses a chunk boundary
    assert backend.gets <= 2 * len(rare), backend.gets
    assert backend.bytes <= len(rare) * record, backend.bytes
    # The same consumer without the filter reads every byte of the commit log.
    backend.gets = backend.bytes = 0
    async with await AsyncMessageStore.open_read_only(config, store=backend) as reader:
        at = 0
        while at < COUNT:
            at = (await reader.get("t", 0, at, max_count=256))[-1].offset + 1
    assert backend.bytes >= COUNT * len(body(0))


async def test_several_tags_counts_scans_and_the_writer_own_buffer() -> None:
    backend = await build()
    config = small_config(**CONFIG, group_commit_interval=60.0)
    store = await AsyncMessageStore.open(config, store=backend)
    try:
        for i in range(COUNT, COUNT + 50):  # still buffered in the writer
            await store.append("t", 0, body(i), tags=tag_of(i))
        wanted = {"rare", "odd"}
        got = await store.get_by_tags("t", 0, 0, wanted, max_count=10_000, max_scan=10_000)
        assert [m.offset for m in got.messages] == [
            i for i in range(COUNT + 50) if tag_of(i) in wanted]
        assert got.next_offset == COUNT + 50
        few = await store.get_by_tags("t", 0, 0, "odd", max_count=3)
        assert [m.offset for m in few.messages] == [1, 5, 9] and few.next_offset == 10
        none = await store.get_by_tags("t", 0, 8, "rare", max_scan=50)
        assert none.messages == [] and none.next_offset == 58
        at_end = await store.get_by_tags("t", 0, COUNT + 50, "rare")
        assert at_end.messages == [] and at_end.next_offset == COUNT + 50
    finally:
        await store.close()


@pytest.mark.parametrize(("tags", "error", "text"), [
    ([], InvalidArgument, "at least one tag"),
    ([""], InvalidArgument, "must not be empty"),
    (5, InvalidArgumentType, "a str or a collection of str"),
    ([b"rare"], InvalidArgumentType, "must be a str"),
    ({"rare": 1}, InvalidArgumentType, "a str or a collection of str"),
])
async def test_bad_tags_are_refused_naming_them(tags: Any, error: type[Exception],
                                                text: str) -> None:
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=MemoryObjectStore())
    try:
        await store.append("t", 0, b"x", tags="rare")
        with pytest.raises(error, match=text):
            await store.get_by_tags("t", 0, 0, tags)
    finally:
        await store.close()
