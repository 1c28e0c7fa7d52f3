"""ObjectStore cases on multipart uploads: parts uploaded and copied, S3's
part limits, completing, aborting, listing uploads, unknown upload ids."""

from __future__ import annotations

from collections.abc import Iterable

from tieredstore.errors import (
    InvalidRequest,
    NoSuchUpload,
    ObjectNotFound,
    PreconditionFailed,
)
from tieredstore.objectstore.base import MIN_PART_SIZE, ByteRange, PartInfo, UploadInfo
from tieredstore.testing._check import raises
from tieredstore.testing._objectstore_base import ObjectStoreSuite, a_part, md5, payload


class MultipartCases(ObjectStoreSuite):
    """Building an object from parts, and the uploads left open."""

    async def test_multipart_concatenates_uploaded_and_copied_parts(self) -> None:
        async with self.store() as store:
            source = payload(MIN_PART_SIZE + 3_000, seed=2)
            await store.put("mp/source", source)
            first = payload(MIN_PART_SIZE, seed=3)  # exactly the minimum: allowed

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
            assert etag.split("-")[0] != md5(expected), head.etag
            if not self.copied_part_etags_not_md5:
                part_md5s = b"".join(bytes.fromhex(p.etag.strip('"')) for p in parts)
                assert etag == f"{md5(part_md5s)}-3", (etag, parts)
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
            fake = [await a_part(store)]
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
