"""In-memory ObjectStore for unit tests: S3 semantics, no IO."""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from tieredstore.errors import NoSuchUpload, ObjectNotFound, PreconditionFailed
from tieredstore.objectstore.backends.blocking_backed import (
    BlockingBackedObjectStore,
    blocking,
    check_complete_parts,
    check_copy_range,
    check_part,
    check_range_start,
    md5_etag,
    multipart_etag,
)
from tieredstore.objectstore.base import ByteRange, ObjectData, ObjectInfo, PartInfo, UploadInfo
from tieredstore.objectstore.chokepoint import Chokepoint

T = TypeVar("T")



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

    async def _execute(self, op: str, key: str, call: Callable[[], T]) -> T:
        await asyncio.sleep(0)
        return call()

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

    @blocking("put", sends="data")
    def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
            metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        # docstring inherited
        if if_none_match and key in self._objects:
            raise PreconditionFailed(f"{key!r} already exists", op="put", key=key)
        body = bytes(data)
        obj = _Object(body, md5_etag(body), dict(metadata or {}))
        self._store(key, obj)
        return ObjectInfo(key, len(body), obj.etag, dict(obj.metadata))

    def _read(self, key: str, byte_range: ByteRange | None) -> ObjectData:
        obj = self._lookup(key, "get")
        info = ObjectInfo(key, len(obj.data), obj.etag, dict(obj.metadata))
        if byte_range is None:
            return ObjectData(obj.data, info)
        check_range_start(key, len(obj.data), byte_range, "get")
        return ObjectData(obj.data[byte_range.start : byte_range.end], info)

    @blocking("head")
    def head(self, key: str) -> ObjectInfo:
        # docstring inherited
        obj = self._lookup(key, "head")
        return ObjectInfo(key, len(obj.data), obj.etag, dict(obj.metadata))

    @blocking("list")
    def _list(self, prefix: str) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        for key in self._keys[bisect.bisect_left(self._keys, prefix) :]:
            if not key.startswith(prefix):
                break
            obj = self._objects[key]
            out.append(ObjectInfo(key, len(obj.data), obj.etag, modified=obj.modified))
        return out

    @blocking("delete")
    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            if self._objects.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]

    @blocking("create_multipart")
    def create_multipart(self, key: str, *, metadata: Mapping[str, str] | None = None) -> str:
        # docstring inherited
        upload_id = f"upload{next(self._ids)}"
        self._uploads[upload_id] = _Upload(key, dict(metadata or {}), datetime.now(UTC))
        return upload_id

    def _add_part(self, key: str, upload_id: str, number: int, body: bytes, op: str) -> PartInfo:
        upload = self._upload(key, upload_id, op)
        etag = md5_etag(body)
        upload.parts[number] = (body, etag)
        return PartInfo(number, etag, len(body))

    @blocking("upload_part", sends="data")
    def upload_part(self, key: str, upload_id: str, part_number: int,
                    data: bytes | memoryview) -> PartInfo:
        # docstring inherited
        check_part(key, part_number, len(data), "upload_part")
        return self._add_part(key, upload_id, part_number, bytes(data), "upload_part")

    @blocking("upload_part_copy")
    def upload_part_copy(self, key: str, upload_id: str, part_number: int, source_key: str,
                         source_range: ByteRange) -> PartInfo:
        # docstring inherited
        check_part(key, part_number, source_range.length, "upload_part_copy")
        source = self._lookup(source_key, "upload_part_copy").data
        check_copy_range(source_key, len(source), source_range)
        body = source[source_range.start : source_range.end]
        return self._add_part(key, upload_id, part_number, body, "upload_part_copy")

    @blocking("complete_multipart")
    def complete_multipart(self, key: str, upload_id: str, parts: Sequence[PartInfo], *,
                           if_none_match: bool = False) -> ObjectInfo:
        # docstring inherited
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

    @blocking("abort_multipart")
    def abort_multipart(self, key: str, upload_id: str) -> None:
        # docstring inherited
        upload = self._uploads.get(upload_id)
        if upload is not None and upload.key == key:
            del self._uploads[upload_id]

    @blocking("list_multipart_uploads")
    def list_multipart_uploads(self, prefix: str) -> list[UploadInfo]:
        # docstring inherited
        return sorted(
            (
                UploadInfo(u.key, uid, u.initiated)
                for uid, u in self._uploads.items()
                if u.key.startswith(prefix)
            ),
            key=lambda u: (u.key, u.upload_id),
        )
