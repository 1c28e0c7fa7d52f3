"""``open`` of the async stores, usable as the sync one is: awaited for the store,
or entered with ``async with`` (``async with AsyncMessageStore.open(config) as
store:``), which closes the store on the way out, as ``with
MessageStore.open(config) as store:`` does."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")


class Closable(Protocol):
    async def close(self) -> None: ...


S = TypeVar("S", bound=Closable)


class Opening(Generic[S]):
    """An open under way. ``await`` it for the store (the caller closes it), or
    use it as ``async with ... as store`` (closed when the block ends). Either,
    once: it runs the open's coroutine."""

    __slots__ = ("_open", "_store")

    def __init__(self, open_: Coroutine[Any, Any, S]) -> None:
        self._open = open_
        self._store: S | None = None

    def __await__(self) -> Generator[Any, None, S]:
        return self._open.__await__()

    async def __aenter__(self) -> S:
        self._store = await self._open
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        store, self._store = self._store, None
        if store is not None:
            await store.close()


def opening(open_: Callable[P, Coroutine[Any, Any, S]]) -> Callable[P, Opening[S]]:
    """Make the async ``open_`` return an :class:`Opening` (same signature and
    docstring)."""
    @functools.wraps(open_)
    def call(*args: P.args, **kwargs: P.kwargs) -> Opening[S]:
        return Opening(open_(*args, **kwargs))
    return call
