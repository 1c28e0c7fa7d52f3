"""The async ObjectStore over blocking primitives: the base of the memory and local backends.

The async interface, the chokepoint routing and the S3 rule checks live here
once; a backend fills in the blocking ``_*_now`` methods and says how to run
them (inline for memory, in a worker thread for files).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

from tieredstore.checksum import crc32c
from tieredstore.errors import InvalidRequest
from tieredstore.objectstore.base import (
    MAX_LIST_PAGE,
    MAX_PART_SIZE,
    ByteRange,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
    UploadInfo,
    check_part_number,
)

T = TypeVar("T")


def slice_range(key: str, data: bytes, byte_range: ByteRange | None, op: str = "get") -> bytes:
    """S3's ranged-GET rule: a start past the end is refused, a long end is clipped."""
    if byte_range is None:
        return data
    check_range_start(key, len(data), byte_range, op)
    return data[byte_range.start : byte_range.end]


def check_range_start(key: str, size: int, byte_range: ByteRange, op: str) -> None:
    if byte_range.start >= size:
        raise InvalidRequest(
            f"InvalidRange: {byte_range.http_header()} of a {size}-byte object", op=op, key=key
        )


def check_copy_range(source_key: str, size: int, byte_range: ByteRange) -> None:
    if byte_range.end > size:
        raise InvalidRequest(
            f"InvalidRange: {byte_range.http_header()} of {size}-byte {source_key!r}",
            op="upload_part_copy",
            key=source_key,
        )


def check_part(key: str, number: int, size: int, op: str) -> None:
    check_part_number(key, number)
    if size > MAX_PART_SIZE:
        raise InvalidRequest(f"EntityTooLarge: part {number} has {size} bytes", op=op, key=key)


class BlockingBackedObjectStore(ObjectStore):
    """An async ObjectStore whose operations run blocking ``_*_now`` methods."""

    @abc.abstractmethod
    async def _execute(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking primitive (inline, or in a worker thread)."""

    def _validate_key(self, key: str) -> None:
        """Refuse keys this backend cannot hold."""

    async def _op(self, op: str, fn: Callable[..., T], *args: Any, bytes_up: int = 0) -> T:
        return await self.chokepoint.call(op, lambda: self._execute(fn, *args), bytes_up=bytes_up)

    # --- primitives ---------------------------------------------------------

    @abc.abstractmethod
    def _put_now(
        self, key: str, data: bytes | memoryview, if_none_match: bool, metadata: dict[str, str]
    ) -> ObjectInfo: ...

    @abc.abstractmethod
    def _get_now(self, key: str, byte_range: ByteRange | None) -> ObjectData: ...

    @abc.abstractmethod
    def _head_now(self, key: str) -> ObjectInfo: ...

    @abc.abstractmethod
    def _list_now(self, prefix: str) -> list[ObjectInfo]:
        """Every object under the prefix, sorted by key."""

    @abc.abstractmethod
    def _delete_now(self, keys: list[str]) -> None: ...

    @abc.abstractmethod
    def _create_multipart_now(self, key: str, metadata: dict[str, str]) -> str: ...

    @abc.abstractmethod
    def _upload_part_now(
        self, key: str, upload_id: str, number: int, data: bytes | memoryview
    ) -> PartInfo: ...

    @abc.abstractmethod
    def _upload_part_copy_now(
        self, key: str, upload_id: str, number: int, source_key: str, source_range: ByteRange
    ) -> PartInfo: ...

    @abc.abstractmethod
    def _complete_now(
        self, key: str, upload_id: str, parts: list[PartInfo], if_none_match: bool
    ) -> ObjectInfo: ...

    @abc.abstractmethod
    def _abort_now(self, key: str, upload_id: str) -> None: ...

    @abc.abstractmethod
    def _list_uploads_now(self, prefix: str) -> list[UploadInfo]: ...

    # --- the async interface --------------------------------------------------

    async def put(
        self,
        key: str,
        data: bytes | memoryview,
        *,
        if_none_match: bool = False,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        # docstring inherited
        self._validate_key(key)
        return await self._op(
            "put", self._put_now, key, data, if_none_match, dict(metadata or {}),
            bytes_up=len(data),
        )

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        # docstring inherited
        return await self._op("get", self._get_now, key, byte_range)

    async def get_object_with_crc(self, key: str, byte_range: ByteRange | None = None
                                  ) -> ObjectData:
        # docstring inherited
        if type(self).get_object is not BlockingBackedObjectStore.get_object:
            # A subclass reads its own way (a fault injector): through it.
            return await super().get_object_with_crc(key, byte_range)
        return await self._op("get", self._get_with_crc_now, key, byte_range)

    def _get_with_crc_now(self, key: str, byte_range: ByteRange | None) -> ObjectData:
        got = self._get_now(key, byte_range)
        return ObjectData(got.data, got.info, crc32c(got.data))

    async def head(self, key: str) -> ObjectInfo:
        # docstring inherited
        return await self._op("head", self._head_now, key)

    async def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        # docstring inherited
        found = await self._op("list", self._list_now, prefix)
        for i in range(0, len(found), MAX_LIST_PAGE):
            yield found[i : i + MAX_LIST_PAGE]

    async def delete_many(self, keys: Sequence[str]) -> None:
        # docstring inherited
        for key in keys:
            self._validate_key(key)
        if keys:
            await self._op("delete", self._delete_now, list(keys))

    async def create_multipart(
        self, key: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        # docstring inherited
        self._validate_key(key)
        return await self._op(
            "create_multipart", self._create_multipart_now, key, dict(metadata or {})
        )

    async def upload_part(
        self, key: str, upload_id: str, part_number: int, data: bytes | memoryview
    ) -> PartInfo:
        # docstring inherited
        check_part(key, part_number, len(data), "upload_part")
        return await self._op(
            "upload_part", self._upload_part_now, key, upload_id, part_number, data,
            bytes_up=len(data),
        )

    async def upload_part_copy(
        self,
        key: str,
        upload_id: str,
        part_number: int,
        source_key: str,
        source_range: ByteRange,
    ) -> PartInfo:
        # docstring inherited
        check_part(key, part_number, source_range.length, "upload_part_copy")
        return await self._op(
            "upload_part_copy", self._upload_part_copy_now,
            key, upload_id, part_number, source_key, source_range,
        )

    async def complete_multipart(
        self,
        key: str,
        upload_id: str,
        parts: Sequence[PartInfo],
        *,
        if_none_match: bool = False,
    ) -> ObjectInfo:
        # docstring inherited
        return await self._op(
            "complete_multipart", self._complete_now, key, upload_id, list(parts), if_none_match
        )

    async def abort_multipart(self, key: str, upload_id: str) -> None:
        # docstring inherited
        await self._op("abort_multipart", self._abort_now, key, upload_id)

    async def list_multipart_uploads(self, prefix: str) -> list[UploadInfo]:
        # docstring inherited
        return await self._op("list_multipart_uploads", self._list_uploads_now, prefix)


__all__ = ["MAX_LIST_PAGE", "BlockingBackedObjectStore", "check_copy_range",
           "check_range_start", "slice_range"]
