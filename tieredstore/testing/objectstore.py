"""ObjectStoreTests: the ObjectStore contract, as a suite a backend subclasses.

Every backend of :class:`tieredstore.objectstore.ObjectStore` promises S3's
semantics (see :mod:`tieredstore.objectstore.base`). This class holds the
cases that check it; a backend's test module subclasses it and says how to
build a store, zarr's ``StoreTests`` style::

    # test_my_backend.py (pytest with pytest-asyncio, asyncio_mode = "auto")
    import pytest
    from tieredstore.objectstore import ObjectStore
    from tieredstore.testing import ObjectStoreTests
    from my_package import MyObjectStore

    class TestMyObjectStore(ObjectStoreTests):
        @pytest.fixture(autouse=True)
        def _root(self, tmp_path):          # any fixture the store needs
            self.root = tmp_path

        async def make_store(self) -> ObjectStore:   # a new, empty store per test
            return MyObjectStore(self.root)

Every ``test_*`` method then runs against the store: pytest makes a new
instance of the class per test, runs its autouse fixtures, and the test
calls :meth:`ObjectStoreTests.make_store` once, closing the store at its end
with :meth:`ObjectStoreTests.close_store`. The tests are coroutines: run
them with pytest-asyncio in auto mode, or mark the subclass
(``pytestmark = pytest.mark.asyncio``) in strict mode. The kit does not
import pytest; for pytest's detailed assertion messages, call
``pytest.register_assert_rewrite("tieredstore.testing")`` in your
``conftest.py`` before importing it.

A store is held to what AWS S3 does. A test server that departs from it in a
known way declares the departure with the class attributes below (each
defaults to False), and the one assertion it concerns is skipped for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections.abc import AsyncIterator, Iterable

from tieredstore.errors import (
    InvalidRequest,
    NoSuchUpload,
    ObjectNotFound,
    PreconditionFailed,
)
from tieredstore.objectstore.base import (
    MAX_LIST_PAGE,
    MIN_PART_SIZE,
    ByteRange,
    ObjectInfo,
    ObjectStore,
    PartInfo,
    UploadInfo,
)
from tieredstore.testing._check import raises

__all__ = ["ObjectStoreTests"]

# Requests in flight at once when a test writes many objects.
_CONCURRENCY = 32

_LISTED = [f"list/k/{i:05d}" for i in range(1_050)]
# Keys below a key that is itself an object.
_NESTED = ["list/k/00005/child", "list/k/00005/child/deeper"]
# Keys that share the string "list/k" but not the "directory" "list/k/".
_NEIGHBOURS = ["list/k", "list/k-other", "list/k2/x", "list/kk"]
_ELSEWHERE = ["list/j/z", "other"]

# Ranged GETs of the object bytes(range(100)): (name, start, length, expected bytes).
_RANGES = [
    ("start", 0, 10, range(0, 10)),
    ("middle", 40, 20, range(40, 60)),
    ("end", 90, 10, range(90, 100)),
    ("last byte", 99, 1, range(99, 100)),
    ("past the end is clipped", 95, 50, range(95, 100)),
    ("whole and more", 0, 1000, range(0, 100)),
]


def _payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


async def _put_all(store: ObjectStore, keys: Iterable[str], data: bytes = b"x") -> None:
    gate = asyncio.Semaphore(_CONCURRENCY)

    async def put(key: str) -> None:
        async with gate:
            await store.put(key, data)

    await asyncio.gather(*(put(k) for k in keys))


async def _keys(store: ObjectStore, prefix: str) -> list[str]:
    return [o.key for o in await store.list_all(prefix)]


async def _a_part(store: ObjectStore) -> PartInfo:
    """A part as a caller would list it, from an upload that is then aborted."""
    upload_id = await store.create_multipart("mp/other")
    part = await store.upload_part("mp/other", upload_id, 1, b"data")
    await store.abort_multipart("mp/other", upload_id)
    return part


class ObjectStoreTests:
    """The ObjectStore conformance suite. Subclass it and define :meth:`make_store`."""

    # --- departures from AWS S3 a test server may declare ------------------------

    lists_by_directory: bool = False
    """Listings go directory by directory (SeaweedFS): ``a/b/...`` comes before
    ``a/b-c`` though ``-`` sorts before ``/``. AWS sorts whole keys by bytes."""

    folds_double_slash: bool = False
    """A listing prefix's ``//`` is read as ``/`` (SeaweedFS); AWS compares bytes."""

    copied_part_etags_not_md5: bool = False
    """UploadPartCopy answers ETags that are not the part's MD5 (SeaweedFS), so
    the object's ETag is not AWS's MD5-of-part-MD5s."""

    empty_complete_is_no_such_upload: bool = False
    """Completing with no parts answers NoSuchUpload (SeaweedFS) where AWS
    answers MalformedXML (InvalidRequest)."""

    unknown_upload_is_server_error: bool = False
    """An unknown upload id answers 500 (moto) where AWS answers NoSuchUpload."""

    upload_id_not_bound_to_key: bool = False
    """An upload id is looked up without its key (moto): a part sent with the
    wrong key is taken, an abort with the wrong key aborts."""

    copy_range_past_source_end_allowed: bool = False
    """UploadPartCopy copies what exists of a range past the source's end
    (moto) where AWS answers InvalidRange."""

    # --- what a subclass provides ---------------------------------------------------

    async def make_store(self) -> ObjectStore:
        """A new, empty store. Each test calls it once."""
        raise NotImplementedError(f"{type(self).__name__} must define make_store()")

    async def close_store(self, store: ObjectStore) -> None:
        """Release a store :meth:`make_store` built (by default ``store.close()``)."""
        await store.close()

    @contextlib.asynccontextmanager
    async def store(self) -> AsyncIterator[ObjectStore]:
        """A store from :meth:`make_store`, closed on the way out."""
        store = await self.make_store()
        try:
            yield store
        finally:
            await self.close_store(store)

    # --- put / get / head -----------------------------------------------------------

    async def test_put_get_head_round_trip_with_metadata(self) -> None:
        async with self.store() as store:
            data = _payload(10_000, seed=1)
            # S3 returns user metadata keys lower-cased: callers use lower-case keys.
            metadata = {"crc32c": "1234567", "writer": "broker-a"}
            put = await store.put("obj/a", data, metadata=metadata)
            assert (put.key, put.size) == ("obj/a", len(data)), put

            assert await store.get("obj/a") == data
            head = await store.head("obj/a")
            assert (head.key, head.size, dict(head.metadata)) == ("obj/a", len(data), metadata)
            assert head.etag == put.etag, (head.etag, put.etag)
            # A single-part object's ETag is the quoted hex MD5 of its bytes.
            assert head.etag.strip('"') == _md5(data), head.etag
            listed = await store.list_all("obj/")
            assert [(o.key, o.size, o.etag) for o in listed] == [
                ("obj/a", len(data), head.etag)
            ], listed

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

    async def test_empty_object(self) -> None:
        async with self.store() as store:
            put = await store.put("obj/empty", b"")
            assert put.size == 0
            assert await store.get("obj/empty") == b""
            head = await store.head("obj/empty")
            assert head.size == 0 and dict(head.metadata) == {}, head
            assert head.etag.strip('"') == _md5(b""), head.etag
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
            assert await _keys(store, "long/") == sorted(keys)

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
            assert await _keys(store, "odd/") == keys
            await store.delete_many(keys)
            assert await _keys(store, "odd/") == []

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
            assert await _keys(store, "del/") == []
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

    # --- listing and deleting ---------------------------------------------------------

    def _in_listing_order(self, keys: list[str]) -> list[str]:
        """What a listing of ``keys`` looks like: sorted by UTF-8 bytes, as S3 does."""
        if self.lists_by_directory:
            # Directory by directory: "list/k/..." (the entries of directory "k")
            # before its sibling "list/k-other". Our keys are fixed-width below
            # each directory, where the two orders agree.
            return sorted(keys, key=lambda k: k.split("/"))
        return sorted(keys)

    async def test_prefixes_naming_impossible_directories_list_nothing(self) -> None:
        async with self.store() as store:
            await store.put("dots/a", b"1")
            prefixes = ["../", "../../", "dots/../", "./", "dots/./", "/"]
            if not self.folds_double_slash:
                prefixes.append("dots//")
            for prefix in prefixes:
                assert await _keys(store, prefix) == [], prefix
            assert await _keys(store, "dots/") == ["dots/a"]

    async def test_list_pages_and_delete_many_across_more_than_a_page(self) -> None:
        async with self.store() as store:
            await self._list_pages_and_delete_many(store)

    async def _list_pages_and_delete_many(self, store: ObjectStore) -> None:
        await _put_all(store, _LISTED + _NEIGHBOURS + _ELSEWHERE)
        # One after the other: SeaweedFS's filer, creating the file "child" and the
        # directory "child/" for "child/deeper" at the same moment, sometimes keeps
        # only one of them (seen once in a CI run). AWS has no directories.
        for key in _NESTED:
            await store.put(key, b"x")

        pages = [page async for page in store.list_pages("list/k/")]
        assert len(pages) >= 2, [len(p) for p in pages]
        assert all(0 < len(page) <= MAX_LIST_PAGE for page in pages), [len(p) for p in pages]
        listed = [o.key for page in pages for o in page]
        expected = sorted(_LISTED + _NESTED)
        assert listed == expected, f"{len(listed)} keys listed, {len(expected)} expected"
        # Nested keys sort bytewise: "00005" < "00005/child" < "00006".
        i = listed.index("list/k/00005")
        assert listed[i : i + 4] == [
            "list/k/00005", "list/k/00005/child", "list/k/00005/child/deeper", "list/k/00006",
        ], listed[i : i + 4]
        assert all(o.size == 1 for page in pages for o in page)

        # A prefix is a string prefix, not a directory: "list/k" takes the neighbours.
        assert await _keys(store, "list/k") == self._in_listing_order(
            _LISTED + _NESTED + _NEIGHBOURS
        )
        assert await _keys(store, "list/k/0001") == [f"list/k/{i:05d}" for i in range(10, 20)]
        assert await _keys(store, "list/k/01049") == ["list/k/01049"]
        assert await _keys(store, "list/k2") == ["list/k2/x"]
        assert await _keys(store, "list/k2/") == ["list/k2/x"]
        assert await _keys(store, "list/kk") == ["list/kk"]
        assert await _keys(store, "list/k/00005/") == _NESTED
        assert await _keys(store, "list/nothing") == []
        assert await _keys(store, "nothing/") == []
        assert [page async for page in store.list_pages("nothing/")] == []
        everything = _LISTED + _NESTED + _NEIGHBOURS + _ELSEWHERE
        assert await _keys(store, "") == self._in_listing_order(everything)

        # More keys than one DeleteObjects call takes, with missing keys mixed in.
        await store.delete_many([*_LISTED, "list/k/missing", "list/k/00000/missing"])
        assert await _keys(store, "list/k/") == _NESTED
        left = _NESTED + _NEIGHBOURS + _ELSEWHERE
        assert await _keys(store, "") == self._in_listing_order(left)
        # Deleting keys that do not exist (any more) is not an error.
        await store.delete_many(_LISTED)
        await store.delete_many(["never/was", "never/was/either"])
        await store.delete_many([])
        await store.delete("never/was")
        await store.delete_many(_NESTED + _NEIGHBOURS + _ELSEWHERE)
        assert await _keys(store, "") == []

    # --- multipart ----------------------------------------------------------------------

    async def test_multipart_concatenates_uploaded_and_copied_parts(self) -> None:
        async with self.store() as store:
            source = _payload(MIN_PART_SIZE + 3_000, seed=2)
            await store.put("mp/source", source)
            first = _payload(MIN_PART_SIZE, seed=3)  # exactly the minimum: allowed

            upload_id = await store.create_multipart("mp/merged", metadata={"crc32c": "42"})
            listed = await store.list_multipart_uploads("mp/")
            assert [(u.key, u.upload_id) for u in listed] == [("mp/merged", upload_id)], listed

            parts = [
                await store.upload_part("mp/merged", upload_id, 1, first),
                # A 5 MiB range out of the middle of the source, copied server-side.
                await store.upload_part_copy(
                    "mp/merged", upload_id, 2, "mp/source", ByteRange(1_000, MIN_PART_SIZE)
                ),
                # The last part may be small; this one ends exactly at the source's end.
                await store.upload_part_copy(
                    "mp/merged", upload_id, 3, "mp/source", ByteRange(len(source) - 700, 700)
                ),
            ]
            assert [(p.part_number, p.size) for p in parts] == [
                (1, MIN_PART_SIZE), (2, MIN_PART_SIZE), (3, 700),
            ], parts
            expected = first + source[1_000 : 1_000 + MIN_PART_SIZE] + source[-700:]

            done = await store.complete_multipart("mp/merged", upload_id, parts)
            assert done.size == len(expected), done
            got = await store.get("mp/merged")
            assert len(got) == len(expected), (len(got), len(expected))
            assert got == expected, "multipart object differs from the concatenation of its parts"
            head = await store.head("mp/merged")
            assert head.size == len(expected), head
            assert dict(head.metadata) == {"crc32c": "42"}, head
            assert await store.get("mp/merged", ByteRange(MIN_PART_SIZE - 2, 4)) == expected[
                MIN_PART_SIZE - 2 : MIN_PART_SIZE + 2
            ]

            # A multipart ETag is not an MD5 of the bytes: "<md5 of part md5s>-<parts>".
            etag = head.etag.strip('"')
            assert etag.endswith("-3"), head.etag
            assert etag.split("-")[0] != _md5(expected), head.etag
            if not self.copied_part_etags_not_md5:
                part_md5s = b"".join(bytes.fromhex(p.etag.strip('"')) for p in parts)
                assert etag == f"{_md5(part_md5s)}-3", (etag, parts)
            assert done.etag in ("", head.etag), (done.etag, head.etag)

            # Completed uploads are no longer listed.
            assert await store.list_multipart_uploads("mp/") == []

    async def test_multipart_non_last_part_under_5_mib_is_refused(self) -> None:
        async with self.store() as store:
            await store.put("mp/src", b"s" * 4_096)
            for how in ("upload", "copy"):
                key = f"mp/small-{how}"
                upload_id = await store.create_multipart(key)
                if how == "upload":
                    first = await store.upload_part(key, upload_id, 1, b"a" * 1_024)
                else:
                    first = await store.upload_part_copy(
                        key, upload_id, 1, "mp/src", ByteRange(0, 1_024)
                    )
                last = await store.upload_part(key, upload_id, 2, b"b" * 10)
                with raises(InvalidRequest, f"complete with a small {how}ed part"):
                    await store.complete_multipart(key, upload_id, [first, last])
                with raises(ObjectNotFound):
                    await store.head(key)
                await store.abort_multipart(key, upload_id)
            assert await store.list_multipart_uploads("mp/") == []

    async def test_multipart_complete_refuses_parts_s3_would_refuse(self) -> None:
        async with self.store() as store:
            upload_id = await store.create_multipart("mp/bad")
            one = await store.upload_part("mp/bad", upload_id, 1, b"1")
            two = await store.upload_part("mp/bad", upload_id, 2, b"2")
            never = PartInfo(3, one.etag, 1)  # part 3 was never uploaded
            wrong_etag = PartInfo(1, two.etag, 1)
            refused = {
                "descending": [two, one],
                "never uploaded": [one, never],
                "wrong etag": [wrong_etag],
            }
            if not self.empty_complete_is_no_such_upload:
                refused["no parts"] = []
            for name, parts in refused.items():
                with raises(InvalidRequest, f"complete with parts {name}"):
                    await store.complete_multipart("mp/bad", upload_id, parts)
            with raises(ObjectNotFound):
                await store.head("mp/bad")
            # The failed completes left the upload open; it still completes.
            await store.complete_multipart("mp/bad", upload_id, [two])
            assert await store.get("mp/bad") == b"2"

    async def test_multipart_part_number_outside_1_to_10000_is_invalid(self) -> None:
        async with self.store() as store:
            await store.put("mp/src", b"source")
            upload_id = await store.create_multipart("mp/n")
            try:
                for number in (0, -1, 10_001):
                    with raises(InvalidRequest, f"upload_part number {number}"):
                        await store.upload_part("mp/n", upload_id, number, b"x")
                    with raises(InvalidRequest, f"upload_part_copy number {number}"):
                        await store.upload_part_copy(
                            "mp/n", upload_id, number, "mp/src", ByteRange(0, 1)
                        )
                last = await store.upload_part("mp/n", upload_id, 10_000, b"last")
                assert last.part_number == 10_000, last
            finally:
                await store.abort_multipart("mp/n", upload_id)

    async def test_multipart_single_small_part_is_allowed(self) -> None:
        async with self.store() as store:
            upload_id = await store.create_multipart("mp/one")
            part = await store.upload_part("mp/one", upload_id, 1, b"only part")
            done = await store.complete_multipart(
                "mp/one", upload_id, [part], if_none_match=True
            )
            assert done.size == 9, done
            assert await store.get("mp/one") == b"only part"
            etag = (await store.head("mp/one")).etag
            assert etag.strip('"').endswith("-1"), etag

    async def test_multipart_complete_if_none_match_on_existing_key(self) -> None:
        async with self.store() as store:
            await store.put("mp/taken", b"already here")
            upload_id = await store.create_multipart("mp/taken")
            part = await store.upload_part("mp/taken", upload_id, 1, b"newcomer")
            with raises(PreconditionFailed):
                await store.complete_multipart(
                    "mp/taken", upload_id, [part], if_none_match=True
                )
            assert await store.get("mp/taken") == b"already here"
            await store.abort_multipart("mp/taken", upload_id)
            assert await store.list_multipart_uploads("mp/") == []

    async def test_abort_drops_the_upload(self) -> None:
        async with self.store() as store:
            upload_id = await store.create_multipart("mp/aborted")
            await store.upload_part("mp/aborted", upload_id, 1, b"part")
            await store.abort_multipart("mp/aborted", upload_id)
            assert await store.list_multipart_uploads("mp/") == []
            if not self.unknown_upload_is_server_error:
                with raises(NoSuchUpload, "upload_part after abort"):
                    await store.upload_part("mp/aborted", upload_id, 2, b"more")
            with raises(ObjectNotFound):
                await store.head("mp/aborted")
            # Aborting again is not an error.
            await store.abort_multipart("mp/aborted", upload_id)

    async def test_list_multipart_uploads_shows_open_uploads_under_prefix(self) -> None:
        async with self.store() as store:
            open_ = {
                ("up/a/1", await store.create_multipart("up/a/1")),
                ("up/a/2", await store.create_multipart("up/a/2")),
                ("up/a/2", await store.create_multipart("up/a/2")),  # two for one key
            }
            neighbour = ("up/ab/3", await store.create_multipart("up/ab/3"))
            completed = await store.create_multipart("up/a/4")
            part = await store.upload_part("up/a/4", completed, 1, b"x")
            await store.complete_multipart("up/a/4", completed, [part])
            aborted = await store.create_multipart("up/a/5")
            await store.abort_multipart("up/a/5", aborted)

            def seen(uploads: Iterable[UploadInfo]) -> set[tuple[str, str]]:
                return {(u.key, u.upload_id) for u in uploads}

            assert seen(await store.list_multipart_uploads("up/a/")) == open_
            uploads = await store.list_multipart_uploads("up/")
            assert all(u.initiated is not None for u in uploads), uploads
            assert seen(await store.list_multipart_uploads("up/a")) == open_ | {neighbour}
            assert seen(await store.list_multipart_uploads("up/ab/")) == {neighbour}
            assert seen(await store.list_multipart_uploads("up/z")) == set()
            listed = await store.list_multipart_uploads("up/")
            assert [u.key for u in listed] == sorted(u.key for u in listed), listed

            for key, upload_id in open_ | {neighbour}:
                await store.abort_multipart(key, upload_id)
            assert await store.list_multipart_uploads("") == []

    async def test_unknown_upload_id(self) -> None:
        async with self.store() as store:
            # One id that was real once (aborted), one that never was.
            stale = await store.create_multipart("mp/u")
            await store.abort_multipart("mp/u", stale)
            await store.put("mp/src", b"source bytes")
            fake = [await _a_part(store)]
            for upload_id in (stale, "2~NoSuchUploadIdEverMade0123456789"):
                await store.abort_multipart("mp/u", upload_id)  # no error
                if self.unknown_upload_is_server_error:
                    continue  # a 500 is retried: do not even ask
                with raises(NoSuchUpload, f"upload_part to {upload_id!r}") as raised:
                    await store.upload_part("mp/u", upload_id, 1, b"data")
                assert isinstance(raised.value, ObjectNotFound)
                with raises(NoSuchUpload, f"upload_part_copy to {upload_id!r}"):
                    await store.upload_part_copy(
                        "mp/u", upload_id, 1, "mp/src", ByteRange(0, 4)
                    )
                with raises(NoSuchUpload, f"complete_multipart of {upload_id!r}"):
                    await store.complete_multipart("mp/u", upload_id, fake)
            with raises(ObjectNotFound):
                await store.head("mp/u")

    async def test_upload_id_is_bound_to_its_key(self) -> None:
        async with self.store() as store:
            upload_id = await store.create_multipart("mp/right")
            if not self.upload_id_not_bound_to_key:
                with raises(NoSuchUpload, "upload_part with another key"):
                    await store.upload_part("mp/wrong", upload_id, 1, b"data")
            await store.abort_multipart("mp/wrong", upload_id)  # not its key: not an error
            if not self.upload_id_not_bound_to_key:
                uploads = await store.list_multipart_uploads("mp/")
                assert [u.upload_id for u in uploads] == [upload_id], uploads
            await store.abort_multipart("mp/right", upload_id)
            assert await store.list_multipart_uploads("mp/") == []

    async def test_upload_part_copy_of_a_bad_source(self) -> None:
        async with self.store() as store:
            await store.put("mp/src", b"0123456789")
            upload_id = await store.create_multipart("mp/dst")
            try:
                if not self.copy_range_past_source_end_allowed:
                    with raises(InvalidRequest, "copy range past the source's end"):
                        await store.upload_part_copy(
                            "mp/dst", upload_id, 1, "mp/src", ByteRange(5, 16)
                        )
                with raises(ObjectNotFound, "copy from a missing source"):
                    await store.upload_part_copy(
                        "mp/dst", upload_id, 1, "mp/none", ByteRange(0, 1)
                    )
            finally:
                await store.abort_multipart("mp/dst", upload_id)
