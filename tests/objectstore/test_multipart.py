"""ObjectWriter (objectstore/multipart.py): one PUT or one multipart upload,
created once, aborted on failure; on the memory store and on moto."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest

from tests.conftest import make_s3_store
from tieredstore.errors import PreconditionFailed, ServerError
from tieredstore.objectstore import (
    MIN_PART_SIZE,
    ByteRange,
    ForwardingObjectStore,
    MemoryObjectStore,
    ObjectStore,
)
from tieredstore.objectstore.multipart import ObjectWriter

T = TypeVar("T")
KEY = "objects/big"
META = {"writer": "w-1"}


class Recorder(ForwardingObjectStore):
    """Records each request's operation; can lose the reply of one (the request
    lands, then the caller gets what a retry would: 412) or fail one outright."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.ops: list[str] = []
        self.lose: str | None = None
        self.fail: tuple[str, int] | None = None

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        self.ops.append(op)
        if self.fail is not None and self.fail == (op, self.ops.count(op)):
            raise ServerError(f"injected failure of {op}", op=op, key=key)
        result = await call()
        if op == self.lose:
            self.lose = None
            raise PreconditionFailed("the retry after a lost reply", op=op, key=key)
        return result


@pytest.fixture(params=["memory", "moto"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Recorder]:
    inner: ObjectStore
    if request.param == "memory":
        inner = MemoryObjectStore()
    else:
        inner = await make_s3_store(request.getfixturevalue("moto"))
    yield Recorder(inner)
    await inner.close()


def payload(size: int) -> bytes:
    return os.urandom(size)


async def write_blocks(writer: ObjectWriter, data: bytes, block: int = 1 << 20) -> None:
    for start in range(0, len(data), block):
        await writer.write(data[start : start + block])


async def no_uploads(store: ObjectStore) -> bool:
    return not await store.list_multipart_uploads("objects/")


async def test_bytes_below_a_part_go_as_one_put(store: Recorder) -> None:
    data = payload(3 << 20)
    writer = ObjectWriter(store, KEY, metadata=META)
    await write_blocks(writer, data)
    assert await writer.finish()
    assert store.ops == ["put"]
    assert writer.parts == 0 and writer.size == len(data)
    got = await store.get_object(KEY)
    assert bytes(got.data) == data and got.info.metadata["writer"] == "w-1"


async def test_bytes_past_a_part_go_as_a_multipart_upload_of_parts_of_part_size(
        store: Recorder) -> None:
    data = payload(12 << 20)
    writer = ObjectWriter(store, KEY, metadata=META, concurrency=2)
    await write_blocks(writer, data)
    assert await writer.finish()
    assert store.ops == ["create_multipart", *["upload_part"] * 3, "complete_multipart"]
    assert writer.parts == 3  # 5 + 5 + 2 MiB
    got = await store.get_object(KEY)
    assert bytes(got.data) == data and got.info.metadata["writer"] == "w-1"
    assert await no_uploads(store)


async def test_copies_go_server_side_and_small_ranges_are_read(store: Recorder) -> None:
    big, small = payload(6 << 20), payload(1000)
    await store.inner.put("objects/big-source", big)
    await store.inner.put("objects/small-source", small)
    head = payload(MIN_PART_SIZE)
    writer = ObjectWriter(store, KEY)
    await writer.write(head)  # a full part: sent
    await writer.copy("objects/big-source", ByteRange(1 << 20, 5 << 20))
    await writer.copy("objects/small-source", ByteRange(10, 900))  # under the floor: read
    await writer.write(b"tail")
    # 900 + 4 bytes pending, under the floor: this copy is read too.
    await writer.copy("objects/big-source", ByteRange(0, 5 << 20))
    assert await writer.finish()
    assert store.ops == ["create_multipart", "upload_part", "upload_part_copy", "get", "get",
                         "upload_part", "complete_multipart"]
    expected = head + big[1 << 20 :] + small[10:910] + b"tail" + big[: 5 << 20]
    assert bytes(await store.get(KEY)) == expected and writer.size == len(expected)


async def test_a_whole_part_under_the_floor_before_another_part_is_refused() -> None:
    store = MemoryObjectStore()
    writer = ObjectWriter(store, KEY)

    async def small() -> bytes:
        return b"x" * 10

    await writer.write_part(10, small)
    with pytest.raises(ValueError, match="every part but the last"):
        await writer.write_part(10, small)
    await writer.abort()
    assert await no_uploads(store)
    with pytest.raises(ValueError, match="below S3's minimum part"):
        ObjectWriter(store, KEY, part_size=MIN_PART_SIZE - 1)


@pytest.mark.parametrize("size", [1 << 20, 6 << 20], ids=["put", "multipart"])
async def test_a_lost_reply_is_ours_by_our_metadata(store: Recorder, size: int) -> None:
    store.lose = "put" if size < MIN_PART_SIZE else "complete_multipart"
    data = payload(size)
    writer = ObjectWriter(store, KEY, metadata=META)
    await write_blocks(writer, data)
    assert await writer.finish()
    assert store.lose is None  # the reply was lost
    assert bytes(await store.get(KEY)) == data
    assert await no_uploads(store)


@pytest.mark.parametrize("size", [1 << 20, 6 << 20], ids=["put", "multipart"])
async def test_a_key_taken_by_another_writer_is_not_ours(store: Recorder, size: int) -> None:
    theirs = payload(size)
    await store.put(KEY, theirs, metadata={"writer": "w-0"})
    writer = ObjectWriter(store, KEY, metadata=META)
    await write_blocks(writer, payload(size))
    assert not await writer.finish()
    assert bytes(await store.get(KEY)) == theirs
    assert await no_uploads(store)


async def test_is_ours_decides_a_taken_key(store: Recorder) -> None:
    await store.put(KEY, b"whatever")
    asked: list[str] = []

    async def ours() -> bool:
        asked.append(KEY)
        return True

    writer = ObjectWriter(store, KEY)
    await write_blocks(writer, payload(6 << 20))
    assert await writer.finish(is_ours=ours)
    assert asked == [KEY]
    assert await no_uploads(store)


async def test_a_failed_part_aborts_the_upload(store: Recorder) -> None:
    store.fail = ("upload_part", 2)
    writer = ObjectWriter(store, KEY, concurrency=3)
    with pytest.raises(ServerError, match="injected"):
        await write_blocks(writer, payload(16 << 20))
        await writer.finish()
    await writer.abort()  # the caller's, after any failure: harmless twice
    assert store.ops.count("abort_multipart") == 1
    assert await no_uploads(store)
    assert not await store.list_all(KEY)


async def test_a_failed_completion_aborts_the_upload(store: Recorder) -> None:
    store.fail = ("complete_multipart", 1)
    writer = ObjectWriter(store, KEY)
    await write_blocks(writer, payload(6 << 20))
    with pytest.raises(ServerError, match="injected"):
        await writer.finish()
    assert store.ops[-1] == "abort_multipart"
    assert await no_uploads(store)


class Slow(ForwardingObjectStore):
    """Parts take a while; notes the most uploads in flight at once."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.flying = self.most = 0

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        if not op.startswith("upload_part"):
            return await call()
        self.flying += 1
        self.most = max(self.most, self.flying)
        try:
            await asyncio.sleep(0.01)
            return await call()
        finally:
            self.flying -= 1


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_at_most_concurrency_parts_are_in_flight(concurrency: int) -> None:
    store = Slow(MemoryObjectStore())
    await store.put("objects/source", payload(MIN_PART_SIZE))
    data = payload(MIN_PART_SIZE)
    writer = ObjectWriter(store, KEY, concurrency=concurrency)
    for _ in range(3):
        await writer.write(data)
        await writer.copy("objects/source", ByteRange(0, MIN_PART_SIZE))
    assert await writer.finish()
    assert store.most == concurrency and writer.parts == 6
    assert bytes(await store.get(KEY)) == (data + await store.get("objects/source")) * 3
