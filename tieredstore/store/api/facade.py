"""MessageStore: the sync facade over AsyncMessageStore, with the same names.

One event loop runs in one daemon thread for the facade's whole life
(:class:`tieredstore.sync.LoopThread`); each call is submitted to it and
waited for, except most appends, which are checked and given their offset in
the caller's thread and sent to the loop in batches
(:mod:`tieredstore.store.api.outbox`). Safe to call from several threads.

Each method is the async store's, stated once there: :func:`on_loop` makes a
coroutine method a blocking one (run on the loop after the appends queued
before it) and :func:`as_is` hands a plain method through; both keep the
signature and docstring, for mypy and for ``help()``. Only what blocks
differently is written here: ``open``, ``append``, ``append_batch``, ``close``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from tieredstore.store.api.message_store import AsyncMessageStore
from tieredstore.store.api.outbox import Errors, Outbox
from tieredstore.store.base import arguments
from tieredstore.store.base.outgoing import Outgoing
from tieredstore.sync import LoopThread

P = ParamSpec("P")
T = TypeVar("T")


def on_loop(method: Callable[Concatenate[AsyncMessageStore, P], Awaitable[T]], *,
            errors: Errors = "ignore") -> Callable[Concatenate[MessageStore, P], T]:
    """The blocking twin of the async ``method``: run on the loop once the
    appends queued before it were sent (a kept append failure raised first as
    ``errors`` says: see :meth:`Outbox.run`)."""
    @functools.wraps(method)
    def call(self: MessageStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._outbox.run(lambda: method(self.core, *args, **kwargs), errors=errors)
    return call


def as_is(method: Callable[Concatenate[AsyncMessageStore, P], T]
          ) -> Callable[Concatenate[MessageStore, P], T]:
    """The async store's plain (not async) ``method``, called in the caller's thread."""
    @functools.wraps(method)
    def call(self: MessageStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return method(self.core, *args, **kwargs)
    return call


def opened(open_core: Callable[P, Awaitable[AsyncMessageStore]]
           ) -> Callable[P, MessageStore]:
    """:meth:`AsyncMessageStore.open` for sync callers, on a loop thread of its own."""
    @functools.wraps(open_core)
    def call(*args: P.args, **kwargs: P.kwargs) -> MessageStore:
        loop = LoopThread()

        async def core_opened() -> AsyncMessageStore:
            return await open_core(*args, **kwargs)

        try:
            core = loop.run(core_opened())
        except BaseException:
            loop.close()
            raise
        return MessageStore(core, loop)
    call.__signature__ = inspect.signature(open_core).replace(  # type: ignore[attr-defined]
        return_annotation="MessageStore")
    return call


class MessageStore:
    """Blocking message store for hosts that are not async. Use :meth:`open`."""

    def __init__(self, core: AsyncMessageStore, loop: LoopThread) -> None:
        self.core = core
        self._loop = loop
        self._outbox = Outbox(core, loop)

    open = staticmethod(opened(AsyncMessageStore.open))

    def __repr__(self) -> str:
        return f"<MessageStore {self.core.ctx!r}>"

    @property
    def corrupt(self) -> dict[tuple[str, int], Exception]:
        return dict(self.core.corrupt)

    @property
    def damaged(self) -> dict[tuple[str, int], list[str]]:
        return self.core.damaged

    @property
    def metrics_port(self) -> int | None:
        return self.core.metrics_port

    queues = as_is(AsyncMessageStore.queues)
    snapshot = as_is(AsyncMessageStore.snapshot)
    metrics_collector = as_is(AsyncMessageStore.metrics_collector)

    flush = on_loop(AsyncMessageStore.flush, errors="report")
    get = on_loop(AsyncMessageStore.get)
    get_around_damage = on_loop(AsyncMessageStore.get_around_damage)
    get_by_tags = on_loop(AsyncMessageStore.get_by_tags)
    query_by_key = on_loop(AsyncMessageStore.query_by_key)
    offset_for_time = on_loop(AsyncMessageStore.offset_for_time)
    min_offset = on_loop(AsyncMessageStore.min_offset)
    max_offset = on_loop(AsyncMessageStore.max_offset)
    commit_offset = on_loop(AsyncMessageStore.commit_offset)
    delete_expired = on_loop(AsyncMessageStore.delete_expired)
    collect_garbage = on_loop(AsyncMessageStore.collect_garbage)
    compact_log = on_loop(AsyncMessageStore.compact_log)
    wait_idle = on_loop(AsyncMessageStore.wait_idle)

    def append(self, topic: str, queue_id: int, body: bytes, *, keys: Sequence[str] = (),
               tags: str | None = None, properties: Mapping[str, str] | None = None,
               timestamp: int | None = None, offset: int | None = None) -> int:
        """As :meth:`AsyncMessageStore.append`, but checked here and sent to the loop
        with the appends around it (see :mod:`tieredstore.store.api.outbox`): a failure
        to store it is raised by the next call. Durable after :meth:`flush`."""
        core = self.core
        message = arguments.check_append(
            topic, queue_id, body, keys=keys, tags=tags, properties=properties,
            timestamp=timestamp, offset=offset, config=core.config,
            topic_reserved_time=core.topic_reserved_time)
        if timestamp is None:  # the clock when it is appended, not when it is sent
            message = message._replace(timestamp=arguments.now_ms())
        if offset is not None:  # the store checks it against the queue: through the loop
            return self._outbox.through_loop(
                (topic, queue_id), lambda: core.append_checked(topic, queue_id, [message],
                                                               offset)).start
        return self._outbox.append((topic, queue_id), message)

    def append_batch(self, topic: str, queue_id: int,
                     messages: Sequence[bytes | Outgoing]) -> range:
        """As :meth:`AsyncMessageStore.append_batch`, in one hop to the loop."""
        return self._outbox.through_loop(
            (topic, queue_id), lambda: self.core.append_batch(topic, queue_id, messages))

    def close(self) -> None:
        """Flush and stop; the loop thread ends. Idempotent."""
        try:
            if not self._loop.closed:
                try:
                    self._outbox.run(self.core.close, errors="report")
                except BaseException as exc:  # a kept failure, raised before the close
                    try:
                        self._loop.run(self.core.close())  # idempotent: closed either way
                    except Exception as later:  # the first failure is the one raised
                        exc.add_note(f"closing then failed too: {later!r}")
                    raise
        finally:
            self._loop.close()

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
