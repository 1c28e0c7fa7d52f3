"""ObjectStore cases on single objects: put, get and head, ranged gets,
missing keys, and the conditional create (``If-None-Match: *``)."""

from __future__ import annotations

import asyncio

from tieredstore.checksum import crc32c
from tieredstore.errors import InvalidRequest, ObjectNotFound, PreconditionFailed
from tieredstore.objectstore.base import ByteRange, ObjectInfo
from tieredstore.testing._check import raises
from tieredstore.testing._objectstore_base import (
    ObjectStoreSuite,
    check_put_etag,
    listed_keys,
    payload,
)

# Ranged GETs of the object bytes(range(100)): (name, start, length, expected bytes).
_RANGES = [
    ("start", 0, 10, range(0, 10)),
    ("middle", 40, 20, range(40, 60)),
    ("end", 90, 10, range(90, 100)),
    ("last byte", 99, 1, range(99, 100)),
    ("past the end is clipped", 95, 50, range(95, 100)),
    ("whole and more", 0, 1000, range(0, 100)),
]


class ObjectCases(ObjectStoreSuite):
    """Writing, reading and conditionally creating one object at a time."""

    # --- put / get / head -----------------------------------------------------------

    async def test_put_get_head_round_trip_with_metadata(self) -> None:
        async with self.store() as store:
            data = payload(10_000, seed=1)
            # S3 returns user metadata keys lower-cased: callers use lower-case keys.
            metadata = {"crc32c": "1234567", "writer": "broker-a"}
            put = await store.put("obj/a", data, metadata=metadata)
            assert (put.key, put.size) == ("obj/a", len(data)), put

            assert await store.get("obj/a") == data
            head = await store.head("obj/a")
            assert (head.key, head.size, dict(head.metadata)) == ("obj/a", len(data), metadata)
            assert head.etag == put.etag, (head.etag, put.etag)
            # A single-part object's ETag is the quoted hex MD5 of its bytes (S3).
            check_put_etag(self, head.etag, data)
            other = await store.put("obj/b", data[:-1] + b"x")
            same = await store.put("obj/c", data)
            assert other.etag != put.etag and same.etag == put.etag, (other, same, put)
            listed = await store.list_all("obj/")
            assert [(o.key, o.size, o.etag) for o in listed] == [
                ("obj/a", len(data), head.etag), ("obj/b", len(data), other.etag),
                ("obj/c", len(data), head.etag)], listed

    async def test_get_object_returns_info_with_the_bytes(self) -> None:
        async with self.store() as store:
            await store.put("m/k", b"0123456789", metadata={"crc32c": "abc"})
            whole = await store.get_object("m/k")
            assert whole.data == b"0123456789"
            assert (whole.info.key, whole.info.size) == ("m/k", 10), whole.info
            assert dict(whole.info.metadata) == {"crc32c": "abc"}, whole.info
            # A ranged GET still tells the object's whole size, ETag and metadata.
            part = await store.get_object("m/k", ByteRange(2, 3))
            assert part.data == b"234"
            assert (part.info.size, dict(part.info.metadata)) == (10, {"crc32c": "abc"})
            assert part.info.etag == whole.info.etag == (await store.head("m/k")).etag
            clipped = await store.get_object("m/k", ByteRange(8, 100))
            assert (clipped.data, clipped.info.size) == (b"89", 10), clipped

    async def test_get_object_with_crc_gives_the_crc32c_of_the_bytes_read(self) -> None:
        async with self.store() as store:
            data = payload(70_000, seed=7)
            await store.put("c/k", data, metadata={"m": "v"})
            whole = await store.get_object_with_crc("c/k")
            assert (whole.data, whole.crc32c) == (data, crc32c(data))
            assert dict(whole.info.metadata) == {"m": "v"}, whole.info
            part = await store.get_object_with_crc("c/k", ByteRange(1000, 5000))
            assert (part.data, part.crc32c) == (data[1000:6000], crc32c(data[1000:6000]))
            assert part.info.size == len(data), part.info
            with raises(ObjectNotFound, "get_object_with_crc of a missing key"):
                await store.get_object_with_crc("c/none")

    async def test_empty_object(self) -> None:
        async with self.store() as store:
            put = await store.put("obj/empty", b"")
            assert put.size == 0
            assert await store.get("obj/empty") == b""
            head = await store.head("obj/empty")
            assert head.size == 0 and dict(head.metadata) == {}, head
            check_put_etag(self, head.etag, b"")
            listed = [(o.key, o.size) for o in await store.list_all("obj/")]
            assert listed == [("obj/empty", 0)], listed

    async def test_put_takes_a_memoryview_slice(self) -> None:
        async with self.store() as store:
            buf = bytearray(b"0123456789")
            await store.put("obj/view", memoryview(buf)[2:7])
            assert await store.get("obj/view") == b"23456"
            assert (await store.head("obj/view")).size == 5

    async def test_unconditional_put_replaces(self) -> None:
        async with self.store() as store:
            await store.put("obj/k", b"first", metadata={"v": "1"})
            await store.put("obj/k", b"second!")
            assert await store.get("obj/k") == b"second!"
            head = await store.head("obj/k")
            # The replacement carries its own metadata (none), not the old object's.
            assert head.size == 7 and dict(head.metadata) == {}, head

    async def test_long_key_components_round_trip(self) -> None:
        async with self.store() as store:
            # 250 bytes is as long as the local store holds once it adds its suffix.
            keys = ["long/" + "x" * 250, "long/" + "y" * 250 + "/z", "long/" + "\u00e9" * 27]
            for key in keys:
                await store.put(key, key.encode())
            for key in keys:
                assert await store.get(key) == key.encode(), key
            assert await listed_keys(store, "long/") == sorted(keys)

    async def test_keys_with_characters_that_need_escaping(self) -> None:
        async with self.store() as store:
            keys = sorted([
                "odd/with space",
                "odd/plus+sign",
                "odd/percent%41",
                "odd/unicode-\u00e9\u4e2d",
                "odd/query?a=b&c",
                "odd/tilde~star*",
            ])
            for key in keys:
                await store.put(key, key.encode())
            for key in keys:
                assert await store.get(key) == key.encode(), key
                assert (await store.head(key)).size == len(key.encode()), key
            assert await listed_keys(store, "odd/") == keys
            await store.delete_many(keys)
            assert await listed_keys(store, "odd/") == []

    # --- ranged gets ----------------------------------------------------------------

    async def test_ranged_get(self) -> None:
        async with self.store() as store:
            await store.put("r/obj", bytes(range(100)))
            for name, start, length, expected in _RANGES:
                got = await store.get("r/obj", ByteRange(start, length))
                assert got == bytes(expected), f"{name}: ByteRange({start}, {length})"

    async def test_ranged_get_starting_at_or_past_the_end_is_invalid(self) -> None:
        async with self.store() as store:
            await store.put("r/obj", bytes(range(100)))
            for start in (100, 101, 10_000):
                with raises(InvalidRequest, f"ByteRange({start}, 10)") as raised:
                    await store.get("r/obj", ByteRange(start, 10))
                assert isinstance(raised.value, ValueError)
                with raises(InvalidRequest, f"get_object ByteRange({start}, 10)"):
                    await store.get_object("r/obj", ByteRange(start, 10))

    async def test_ranged_get_of_an_empty_object_is_invalid(self) -> None:
        async with self.store() as store:
            await store.put("r/empty", b"")
            with raises(InvalidRequest):
                await store.get("r/empty", ByteRange(0, 1))

    # --- missing keys ---------------------------------------------------------------

    async def test_missing_key_raises_object_not_found(self) -> None:
        async with self.store() as store:
            await store.put("nf/dir/obj", b"data")
            # Neither a missing key nor a "directory" holding objects is an object.
            for key in ("nf/missing", "nf/dir", "nf/dir/ob"):
                with raises(ObjectNotFound, f"get {key!r}") as raised:
                    await store.get(key)
                assert isinstance(raised.value, FileNotFoundError)
                assert raised.value.key == key, (raised.value.key, key)
                with raises(ObjectNotFound, f"ranged get {key!r}"):
                    await store.get(key, ByteRange(0, 1))
                with raises(ObjectNotFound, f"head {key!r}"):
                    await store.head(key)

    async def test_deleted_key_is_gone(self) -> None:
        async with self.store() as store:
            await store.put("del/a/b", b"1")
            await store.delete("del/a/b")
            with raises(ObjectNotFound):
                await store.get("del/a/b")
            assert await listed_keys(store, "del/") == []
            # The same key can be written again, also conditionally.
            await store.put("del/a/b", b"2", if_none_match=True)
            assert await store.get("del/a/b") == b"2"

    # --- conditional create -----------------------------------------------------------

    async def test_conditional_put(self) -> None:
        async with self.store() as store:
            info = await store.put("c/k", b"first", if_none_match=True)
            assert info.size == 5
            with raises(PreconditionFailed):
                await store.put("c/k", b"second", if_none_match=True, metadata={"x": "y"})
            assert await store.get("c/k") == b"first"
            assert dict((await store.head("c/k")).metadata) == {}

    async def test_concurrent_conditional_puts_have_one_winner(self) -> None:
        async with self.store() as store:
            # SeaweedFS makes contended conditional writers wait (up to seconds): keep few.
            bodies = [f"writer-{i}".encode() for i in range(4)]
            results = await asyncio.gather(
                *(store.put("c/race", b, if_none_match=True) for b in bodies),
                return_exceptions=True,
            )
            winners = [
                b for b, r in zip(bodies, results, strict=True) if isinstance(r, ObjectInfo)
            ]
            losers = [r for r in results if isinstance(r, PreconditionFailed)]
            assert len(winners) == 1, results
            assert len(losers) == len(bodies) - 1, results
            assert await store.get("c/race") == winners[0]
