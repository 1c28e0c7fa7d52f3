"""ForwardingObjectStore: every operation passed to an inner store, to subclass.

The base of wrapper stores (zarr's wrapper stores do the same): the read-only
store, and the fault-injecting stores of tests. A
subclass overrides the operations it watches, delays or fails, and calls
``super()`` for the rest of their work; or it overrides :meth:`_forward`, the
one point every request passes through (a listing as one request that reads
every page, whose pages are then yielded). ``close`` leaves the
inner store open unless ``close_inner``: a test's bucket usually outlives each
store that uses it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from tieredstore.objectstore.base import ObjectInfo, ObjectStore
from tieredstore.objectstore.chokepoint import Chokepoint

T = TypeVar("T")


def _forwarded(name: str, op: str = "", sends: str = "") -> Any:
    """The method ``name`` of ObjectStore, passed to the inner store through
    :meth:`ForwardingObjectStore._forward` as request ``op`` (``name`` if not
    given) on its first argument (a delete's first key), sending the bytes of
    argument ``sends``."""
    parameters = [*inspect.signature(getattr(ObjectStore, name)).parameters.values()][1:]
    first = parameters[0].name
    default = "" if parameters[0].default is inspect.Parameter.empty else parameters[0].default
    at = [p.name for p in parameters].index(sends) if sends else -1

    async def forward(self: ForwardingObjectStore, /, *args: Any, **kwargs: Any) -> Any:
        # Plain lookups, not a signature's bind: this runs for every request.
        given = args[0] if args else kwargs.get(first, default)
        key = given if isinstance(given, str) else next(iter(given), "")
        sent = (args[at] if at < len(args) else kwargs[sends]) if sends else b""
        return await self._forward(op or name, key,
                                   lambda: getattr(self.inner, name)(*args, **kwargs),
                                   bytes_up=len(sent))

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = getattr(ObjectStore, name).__doc__
    return forward


class ForwardingObjectStore(ObjectStore):
    """An ObjectStore that forwards every call to ``inner``."""

    def __init__(self, inner: ObjectStore, *, close_inner: bool = False,
                 chokepoint: Chokepoint | None = None) -> None:
        super().__init__(chokepoint=chokepoint or inner.chokepoint)
        self.inner = inner
        self.name = inner.name
        self.close_inner = close_inner
        self.supports_writes = inner.supports_writes
        self.runs_in_threads = inner.runs_in_threads
        self.temporary_files = inner.temporary_files

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        """Run ``call``, the inner store's ``op`` on ``key`` (the first key of a
        delete), sending ``bytes_up`` bytes. As it is, here; override to watch,
        delay or fail every request at once."""
        return await call()

    put = _forwarded("put", sends="data")
    get_object = _forwarded("get_object", "get")
    head = _forwarded("head")
    create_multipart = _forwarded("create_multipart")
    upload_part = _forwarded("upload_part", sends="data")
    upload_part_copy = _forwarded("upload_part_copy")
    complete_multipart = _forwarded("complete_multipart")
    abort_multipart = _forwarded("abort_multipart")
    list_multipart_uploads = _forwarded("list_multipart_uploads")
    _delete_many = _forwarded("delete_many", "delete")

    async def delete_many(self, keys: Sequence[str]) -> None:
        # docstring inherited
        if keys:  # nothing to delete: no request
            await self._delete_many(keys)

    async def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        # docstring inherited
        async def listing() -> list[list[ObjectInfo]]:
            return [page async for page in self.inner.list_pages(prefix)]

        for page in await self._forward("list", prefix, listing):
            yield page

    async def close(self) -> None:
        # docstring inherited
        if self.close_inner:
            await self.inner.close()
