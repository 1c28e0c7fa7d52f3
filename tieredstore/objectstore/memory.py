"""In-memory ObjectStore for unit tests: S3 semantics, no IO."""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from tieredstore.errors import InvalidRequest, NoSuchUpload, ObjectNotFound, PreconditionFailed
from tieredstore.objectstore.base import (
    ByteRange,
    ObjectData,
    ObjectInfo,
    PartInfo,
    UploadInfo,
    check_parts_for_complete,
)
from tieredstore.objectstore.blocking_backed import (
    BlockingBackedObjectStore,
    check_copy_range,
    slice_range,
)
from tieredstore.objectstore.chokepoint import Chokepoint

T = TypeVar("T")


def md5_etag(data: bytes | memoryview) -> str:
    """S3's ETag of a single-part object: the hex MD5 of its bytes, quoted."""
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


def multipart_etag(part_etags: Sequence[str]) -> str:
    """S3's ETag of a multipart object: MD5 of the part MD5s, dash, part count."""
    digest = hashlib.md5(usedforsecurity=False)
    for etag in part_etags:
        digest.update(bytes.fromhex(etag.strip('"')))
    return f'"{digest.hexdigest()}-{len(part_etags)}"'


def check_complete_parts(
    key: str, parts: Sequence[PartInfo], stored: Callable[[int], tuple[str, int] | None]
) -> None:
    """Every listed part was uploaded with that ETag, and S3's size rules hold.

    ``stored(n)`` gives (etag, size) of uploaded part ``n``, or None.
    """
    sizes: list[tuple[int, int]] = []
    for part in parts:
        found = stored(part.part_number)
        if found is None or found[0] != part.etag:
            raise InvalidRequest(
                f"InvalidPart: part {part.part_number} was not uploaded with that ETag",
                op="complete_multipart",
                key=key,
            )
        sizes.append((part.part_number, found[1]))
    check_parts_for_complete(key, sizes)


@dataclass(slots=True)
class _Object:
    data: bytes
    etag: str
    metadata: dict[str, str]
    modified: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(slots=True)
class _Upload:
    key: str
    metadata: dict[str, str]
    initiated: datetime
    parts: dict[int, tuple[bytes, str]] = field(default_factory=dict)


class MemoryObjectStore(BlockingBackedObjectStore):
    """Objects in a dict, for one event loop. Every call yields to the loop once."""

    name = "memory"

    def __init__(self, *, chokepoint: Chokepoint | None = None) -> None:
        super().__init__(chokepoint=chokepoint)
        self._objects: dict[str, _Object] = {}
        self._keys: list[str] = []  # sorted
        self._uploads: dict[str, _Upload] = {}
        self._ids = itertools.count(1)

    async def _execute(self, fn: Callable[..., T], *args: Any) -> T:
        await asyncio.sleep(0)
        return fn(*args)

    def _store(self, key: str, obj: _Object) -> None:
        if key not in self._objects:
            bisect.insort(self._keys, key)
        self._objects[key] = obj

    def _lookup(self, key: str, op: str) -> _Object:
        try:
            return self._objects[key]
        except KeyError:
            raise ObjectNotFound(f"no object {key!r}", op=op, key=key) from None

    def _upload(self, key: str, upload_id: str, op: str) -> _Upload:
        upload = self._uploads.get(upload_id)
        if upload is None or upload.key != key:
            raise NoSuchUpload(f"no upload {upload_id!r} for {key!r}", op=op, key=key)
        return upload

    def _put_now(
        self, key: str, data: bytes | memoryview, if_none_match: bool, metadata: dict[str, str]
    ) -> ObjectInfo:
        if if_none_match and key in self._objects:
            raise PreconditionFailed(f"{key!r} already exists", op="put", key=key)
        body = bytes(data)
        obj = _Object(body, md5_etag(body), metadata)
        self._store(key, obj)
        return ObjectInfo(key, len(body), obj.etag, dict(metadata))

    def _get_now(self, key: str, byte_range: ByteRange | None) -> ObjectData:
        obj = self._lookup(key, "get")
        info = ObjectInfo(key, len(obj.data), obj.etag, dict(obj.metadata))
        return ObjectData(slice_range(key, obj.data, byte_range), info)

    def _head_now(self, key: str) -> ObjectInfo:
        obj = self._lookup(key, "head")
        return ObjectInfo(key, len(obj.data), obj.etag, dict(obj.metadata))

    def _list_now(self, prefix: str) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        for key in self._keys[bisect.bisect_left(self._keys, prefix) :]:
            if not key.startswith(prefix):
                break
            obj = self._objects[key]
            out.append(ObjectInfo(key, len(obj.data), obj.etag, modified=obj.modified))
        return out

    def _delete_now(self, keys: list[str]) -> None:
        for key in keys:
            if self._objects.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]

    def _create_multipart_now(self, key: str, metadata: dict[str, str]) -> str:
        upload_id = f"upload{next(self._ids)}"
        self._uploads[upload_id] = _Upload(key, metadata, datetime.now(UTC))
        return upload_id

    def _add_part(self, key: str, upload_id: str, number: int, body: bytes, op: str) -> PartInfo:
        upload = self._upload(key, upload_id, op)
        etag = md5_etag(body)
        upload.parts[number] = (body, etag)
        return PartInfo(number, etag, len(body))

    def _upload_part_now(
        self, key: str, upload_id: str, number: int, data: bytes | memoryview
    ) -> PartInfo:
        return self._add_part(key, upload_id, number, bytes(data), "upload_part")

    def _upload_part_copy_now(
        self, key: str, upload_id: str, number: int, source_key: str, source_range: ByteRange
    ) -> PartInfo:
        source = self._lookup(source_key, "upload_part_copy").data
        check_copy_range(source_key, len(source), source_range)
        body = source[source_range.start : source_range.end]
        return self._add_part(key, upload_id, number, body, "upload_part_copy")

    def _complete_now(
        self, key: str, upload_id: str, parts: list[PartInfo], if_none_match: bool
    ) -> ObjectInfo:
        upload = self._upload(key, upload_id, "complete_multipart")

        def stored(n: int) -> tuple[str, int] | None:
            found = upload.parts.get(n)
            return None if found is None else (found[1], len(found[0]))

        check_complete_parts(key, parts, stored)
        if if_none_match and key in self._objects:
            raise PreconditionFailed(f"{key!r} already exists", op="complete_multipart", key=key)
        body = b"".join(upload.parts[p.part_number][0] for p in parts)
        etag = multipart_etag([p.etag for p in parts])
        self._store(key, _Object(body, etag, upload.metadata))
        del self._uploads[upload_id]
        return ObjectInfo(key, len(body), etag, dict(upload.metadata))

    def _abort_now(self, key: str, upload_id: str) -> None:
        upload = self._uploads.get(upload_id)
        if upload is not None and upload.key == key:
            del self._uploads[upload_id]

    def _list_uploads_now(self, prefix: str) -> list[UploadInfo]:
        return sorted(
            (
                UploadInfo(u.key, uid, u.initiated)
                for uid, u in self._uploads.items()
                if u.key.startswith(prefix)
            ),
            key=lambda u: (u.key, u.upload_id),
        )
