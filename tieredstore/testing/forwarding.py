"""ForwardingObjectStore: every operation passed to an inner store, to subclass.

The base of wrapper stores in tests (zarr's wrapper stores do the same): a
subclass overrides the operations it watches, delays or fails, and calls
``super()`` for the rest of their work; or it overrides :meth:`_forward`, the
one point every request but a listing passes through. ``close`` leaves the
inner store open unless ``close_inner``: a test's bucket usually outlives each
store that uses it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from tieredstore.objectstore.base import (
    ByteRange,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
    UploadInfo,
)
from tieredstore.objectstore.chokepoint import Chokepoint

T = TypeVar("T")


class ForwardingObjectStore(ObjectStore):
    """An ObjectStore that forwards every call to ``inner``."""

    def __init__(self, inner: ObjectStore, *, close_inner: bool = False,
                 chokepoint: Chokepoint | None = None) -> None:
        super().__init__(chokepoint=chokepoint or inner.chokepoint)
        self.inner = inner
        self.name = inner.name
        self.close_inner = close_inner

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        """Run ``call``, the inner store's ``op`` on ``key`` (the first key of a
        delete), sending ``bytes_up`` bytes. As it is, here; override to watch,
        delay or fail every request at once."""
        return await call()

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        return await self._forward(
            "put", key,
            lambda: self.inner.put(key, data, if_none_match=if_none_match, metadata=metadata),
            bytes_up=len(data))

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        return await self._forward("get", key, lambda: self.inner.get_object(key, byte_range))

    async def head(self, key: str) -> ObjectInfo:
        return await self._forward("head", key, lambda: self.inner.head(key))

    def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        return self.inner.list_pages(prefix)

    async def delete_many(self, keys: Sequence[str]) -> None:
        await self._forward("delete", keys[0] if keys else "",
                            lambda: self.inner.delete_many(keys))

    async def create_multipart(self, key: str, *, metadata: Mapping[str, str] | None = None
                               ) -> str:
        return await self._forward("create_multipart", key,
                                   lambda: self.inner.create_multipart(key, metadata=metadata))

    async def upload_part(self, key: str, upload_id: str, part_number: int,
                          data: bytes | memoryview) -> PartInfo:
        return await self._forward(
            "upload_part", key, lambda: self.inner.upload_part(key, upload_id, part_number, data),
            bytes_up=len(data))

    async def upload_part_copy(self, key: str, upload_id: str, part_number: int,
                               source_key: str, source_range: ByteRange) -> PartInfo:
        return await self._forward("upload_part_copy", key, lambda: self.inner.upload_part_copy(
            key, upload_id, part_number, source_key, source_range))

    async def complete_multipart(self, key: str, upload_id: str, parts: Sequence[PartInfo], *,
                                 if_none_match: bool = False) -> ObjectInfo:
        return await self._forward("complete_multipart", key, lambda: self.inner.complete_multipart(
            key, upload_id, parts, if_none_match=if_none_match))

    async def abort_multipart(self, key: str, upload_id: str) -> None:
        await self._forward("abort_multipart", key,
                            lambda: self.inner.abort_multipart(key, upload_id))

    async def list_multipart_uploads(self, prefix: str) -> list[UploadInfo]:
        return await self._forward("list_multipart_uploads", prefix,
                                   lambda: self.inner.list_multipart_uploads(prefix))

    async def stale_temporary_files(self, older_than: datetime) -> list[str]:
        return await self.inner.stale_temporary_files(older_than)

    async def delete_temporary_files(self, names: Sequence[str]) -> None:
        await self.inner.delete_temporary_files(names)

    async def close(self) -> None:
        if self.close_inner:
            await self.inner.close()
