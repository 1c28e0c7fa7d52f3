"""ReadOnlyObjectStore: an object store that refuses every write.

Readers that promise never to write (a read-only view of a broker or a
cluster, ``verify``, ``inspect``, Spark's readers) open their object store
through it, so the promise is kept by the store: a write raises
:class:`~tieredstore.errors.ReadOnly` naming the request and its key, and
nothing is sent. Reads pass to the inner store unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from tieredstore.errors import ReadOnly
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.forwarding import ForwardingObjectStore

T = TypeVar("T")

_WRITES = frozenset({"put", "delete", "create_multipart", "upload_part", "upload_part_copy",
                     "complete_multipart", "abort_multipart"})


class ReadOnlyObjectStore(ForwardingObjectStore):
    """``inner`` for reading only. Closing it closes ``inner`` unless told not to."""

    def __init__(self, inner: ObjectStore, *, close_inner: bool = True) -> None:
        super().__init__(inner, close_inner=close_inner)
        self.supports_writes = False
        self.temporary_files = None  # garbage collection deletes them: a write

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        # docstring inherited
        if op in _WRITES:
            raise ReadOnly(op, key)
        return await call()


def read_only(store: ObjectStore, *, close_inner: bool = True) -> ObjectStore:
    """``store`` for reading only (itself when it already is)."""
    return store if not store.supports_writes else \
        ReadOnlyObjectStore(store, close_inner=close_inner)
