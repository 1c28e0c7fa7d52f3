"""The async ObjectStore over blocking bodies: the base of the memory and local backends.

A backend writes each operation once, as a blocking method with the
operation's own signature, and marks it :func:`blocking`: its callers await
it, each attempt runs through the store's chokepoint and the backend's
:meth:`BlockingBackedObjectStore._execute` (inline for memory, in a worker
thread for files). S3's rules that an emulating backend must enforce itself
(ranges, part numbers and sizes, completes, ETags) live here once.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from tieredstore.checksum import crc32c
from tieredstore.errors import InvalidRequest
from tieredstore.objectstore.base import (
    MAX_LIST_PAGE,
    MAX_PART_SIZE,
    MIN_PART_SIZE,
    ByteRange,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
    check_part_number,
)

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="BlockingBackedObjectStore")


def blocking(op: str, *, sends: str = "") -> Callable[
        [Callable[Concatenate[S, P], T]], Callable[Concatenate[S, P], Coroutine[Any, Any, T]]]:
    """The ObjectStore operation ``op`` from its blocking body: each attempt runs
    the body through the store's :meth:`~BlockingBackedObjectStore._execute`,
    inside its chokepoint. ``sends`` names the argument whose bytes go up."""

    def wrap(body: Callable[Concatenate[S, P], T]
             ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
        at = [*inspect.signature(body).parameters].index(sends) - 1 if sends else 0

        async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            key = args[0] if args and isinstance(args[0], str) else ""
            sent: Any = (kwargs[sends] if sends in kwargs else args[at]) if sends else b""
            call = functools.partial(body, self, *args, **kwargs)
            return await self.chokepoint.call(
                op, lambda: self._execute(op, key, call), bytes_up=len(sent), key=key)

        functools.update_wrapper(run, body)
        return run

    return wrap


def check_range_start(key: str, size: int, byte_range: ByteRange, op: str) -> None:
    """S3's ranged-GET rule: a start past the end is refused (a long end is clipped)."""
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


def check_complete_parts(
    key: str, parts: Sequence[PartInfo], stored: Callable[[int], tuple[str, int] | None]
) -> None:
    """S3's rules for CompleteMultipartUpload: at least one part, ascending
    without repeats, each uploaded with that ETag, every one but the last at
    least 5 MiB. ``stored(n)`` gives (etag, size) of uploaded part ``n``, or None.
    """
    op = "complete_multipart"
    if not parts:
        raise InvalidRequest("multipart upload has no parts", op=op, key=key)
    numbers = [p.part_number for p in parts]
    if numbers != sorted(set(numbers)):
        raise InvalidRequest(f"parts must ascend without repeats, got {numbers[:10]}",
                             op=op, key=key)
    for i, part in enumerate(parts):
        found = stored(part.part_number)
        if found is None or found[0] != part.etag:
            raise InvalidRequest(
                f"InvalidPart: part {part.part_number} was not uploaded with that ETag",
                op=op, key=key)
        if i < len(parts) - 1 and found[1] < MIN_PART_SIZE:
            raise InvalidRequest(
                f"EntityTooSmall: part {part.part_number} has {found[1]} bytes, "
                f"every part but the last needs at least {MIN_PART_SIZE}", op=op, key=key)


def md5_etag(data: bytes | memoryview) -> str:
    """S3's ETag of a single-part object: the hex MD5 of its bytes, quoted."""
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


def multipart_etag(part_etags: Sequence[str]) -> str:
    """S3's ETag of a multipart object: MD5 of the part MD5s, dash, part count."""
    digest = hashlib.md5(usedforsecurity=False)
    for etag in part_etags:
        digest.update(bytes.fromhex(etag.strip('"')))
    return f'"{digest.hexdigest()}-{len(part_etags)}"'


class BlockingBackedObjectStore(ObjectStore):
    """An async ObjectStore whose operations are :func:`blocking` bodies."""

    @abc.abstractmethod
    async def _execute(self, op: str, key: str, call: Callable[[], T]) -> T:
        """Run one attempt of ``op`` on ``key``: the blocking ``call`` (inline, or
        in a worker thread). Test stores override it to fail an attempt."""

    @abc.abstractmethod
    def _read(self, key: str, byte_range: ByteRange | None) -> ObjectData:
        """The blocking body of :meth:`get_object`."""

    @abc.abstractmethod
    async def _list(self, prefix: str) -> list[ObjectInfo]:
        """Every object under the prefix, sorted by key (a :func:`blocking` "list")."""

    @abc.abstractmethod
    async def _delete(self, keys: list[str]) -> None:
        """Delete some keys (a :func:`blocking` "delete")."""

    @blocking("get")
    def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        # docstring inherited
        return self._read(key, byte_range)

    async def get_object_with_crc(self, key: str, byte_range: ByteRange | None = None
                                  ) -> ObjectData:
        # docstring inherited
        if type(self).get_object is not BlockingBackedObjectStore.get_object:
            # A subclass reads its own way (a fault injector): through it.
            return await super().get_object_with_crc(key, byte_range)
        return await self._get_with_crc(key, byte_range)

    @blocking("get")
    def _get_with_crc(self, key: str, byte_range: ByteRange | None) -> ObjectData:
        got = self._read(key, byte_range)
        return ObjectData(got.data, got.info, crc32c(got.data))

    async def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        # docstring inherited
        found = await self._list(prefix)
        for i in range(0, len(found), MAX_LIST_PAGE):
            yield found[i : i + MAX_LIST_PAGE]

    async def delete_many(self, keys: Sequence[str]) -> None:
        # docstring inherited
        if keys:
            await self._delete(list(keys))
