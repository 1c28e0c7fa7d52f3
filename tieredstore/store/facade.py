"""MessageStore: the sync facade over AsyncMessageStore, with the same names.

One event loop runs in one daemon thread for the facade's whole life
(:class:`tieredstore.sync.LoopThread`); each call is submitted to it and
waited for, except most appends, which are checked and given their offset in
the caller's thread and sent to the loop in batches
(:mod:`tieredstore.store.outbox`). Safe to call from several threads.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from tieredstore.config import TieredStoreConfig
from tieredstore.objectstore import ObjectStore
from tieredstore.sizes import MiB
from tieredstore.store import arguments
from tieredstore.store.arguments import MAX_TIMESTAMP
from tieredstore.store.codec import KeyProvider
from tieredstore.store.flatfile import now_ms
from tieredstore.store.gc import GcReport
from tieredstore.store.message_store import AsyncMessageStore
from tieredstore.store.observe import StoreCollector
from tieredstore.store.outbox import Outbox
from tieredstore.store.outgoing import Outgoing
from tieredstore.store.record import Message
from tieredstore.store.tagged import MAX_SCAN, Tagged
from tieredstore.sync import LoopThread


class MessageStore:
    """Blocking message store for hosts that are not async. Use :meth:`open`."""

    def __init__(self, core: AsyncMessageStore, loop: LoopThread) -> None:
        self.core = core
        self._loop = loop
        self._outbox = Outbox(core, loop)

    @classmethod
    def open(
        cls,
        config: TieredStoreConfig | None = None,
        *,
        store: ObjectStore | None = None,
        topic_reserved_time: Mapping[str, float] | None = None,
        writer_id: str | None = None,
        key_provider: KeyProvider | None = None,
    ) -> MessageStore:
        """Open and recover (see :meth:`AsyncMessageStore.open`)."""
        loop = LoopThread()
        try:
            core = loop.run(AsyncMessageStore.open(
                config, store=store, topic_reserved_time=topic_reserved_time,
                writer_id=writer_id, key_provider=key_provider))
        except BaseException:
            loop.close()
            raise
        return cls(core, loop)

    def __repr__(self) -> str:
        return f"<MessageStore {self.core.ctx!r}>"

    @property
    def corrupt(self) -> dict[tuple[str, int], Exception]:
        return dict(self.core.corrupt)

    def queues(self) -> list[tuple[str, int]]:
        return self.core.queues()

    def append(self, topic: str, queue_id: int, body: bytes, *, keys: Sequence[str] = (),
               tags: str | None = None, properties: Mapping[str, str] | None = None,
               timestamp: int | None = None, offset: int | None = None) -> int:
        """Append one message; its offset. Checked here, sent to the loop with the
        appends around it (see :mod:`tieredstore.store.outbox`); a failure to
        store it is raised by the next call. Durable after :meth:`flush`."""
        core = self.core
        arguments.check_append(topic, queue_id, body, keys=keys, tags=tags,
                               properties=properties, timestamp=timestamp, offset=offset,
                               config=core.config, topic_reserved_time=core.topic_reserved_time)
        if offset is not None:  # the store checks it against the queue: through the loop
            return self._outbox.through_loop((topic, queue_id), lambda: self._append_at(
                topic, queue_id, body, keys=keys, tags=tags, properties=properties,
                timestamp=timestamp, offset=offset)).start
        message = Outgoing(bytes(body), tuple(keys), tags,
                           None if properties is None else dict(properties),
                           now_ms() if timestamp is None else int(timestamp))
        return self._outbox.append((topic, queue_id), message)

    async def _append_at(self, topic: str, queue_id: int, body: bytes, *,
                         keys: Sequence[str], tags: str | None,
                         properties: Mapping[str, str] | None, timestamp: int | None,
                         offset: int) -> range:
        got = await self.core.append(topic, queue_id, body, keys=keys, tags=tags,
                                     properties=properties, timestamp=timestamp, offset=offset)
        return range(got, got + 1)

    def append_batch(self, topic: str, queue_id: int,
                     messages: Sequence[bytes | Outgoing]) -> range:
        """One hop to the store's loop for the whole batch (see
        :meth:`AsyncMessageStore.append_batch`)."""
        return self._outbox.through_loop(
            (topic, queue_id), lambda: self.core.append_batch(topic, queue_id, messages))

    def flush(self) -> None:
        """Every append before it is durable, or this raises: also for appends the
        outbox could not store since the last flush."""
        self._outbox.run(self.core.flush, errors="report")

    def wait_idle(self) -> None:
        """Once what the outbox holds is sent, wait for the background work under
        way (see :meth:`AsyncMessageStore.wait_idle`). Raises nothing."""
        self._outbox.run(self.core.wait_idle)

    def get(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
            max_bytes: int = 4 * MiB) -> list[Message]:
        return self._outbox.run(lambda: self.core.get(topic, queue_id, offset, max_count,
                                                      max_bytes))

    def get_by_tags(self, topic: str, queue_id: int, offset: int, tags: str | Collection[str],
                    *, max_count: int = 32, max_bytes: int = 4 * MiB,
                    max_scan: int = MAX_SCAN) -> Tagged:
        """See :meth:`AsyncMessageStore.get_by_tags`."""
        return self._outbox.run(lambda: self.core.get_by_tags(
            topic, queue_id, offset, tags, max_count=max_count, max_bytes=max_bytes,
            max_scan=max_scan))

    def query_by_key(self, topic: str, key: str, begin_ms: int = 0,
                     end_ms: int = MAX_TIMESTAMP, max_count: int = 64) -> list[Message]:
        """See :meth:`AsyncMessageStore.query_by_key`."""
        return self._outbox.run(lambda: self.core.query_by_key(topic, key, begin_ms, end_ms,
                                                               max_count))

    def offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self._outbox.run(lambda: self.core.offset_for_time(topic, queue_id,
                                                                  timestamp_ms))

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self._outbox.run(lambda: self.core.min_offset(topic, queue_id))

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self._outbox.run(lambda: self.core.max_offset(topic, queue_id))

    def commit_offset(self, topic: str, queue_id: int) -> int:
        return self._outbox.run(lambda: self.core.commit_offset(topic, queue_id))

    def delete_expired(self, now: float | None = None) -> int:
        return self._outbox.run(lambda: self.core.delete_expired(now))

    def collect_garbage(self, *, dry_run: bool = False,
                        safety_age: float | None = None) -> GcReport:
        return self._outbox.run(lambda: self.core.collect_garbage(dry_run=dry_run,
                                                                  safety_age=safety_age))

    def snapshot(self) -> dict[str, Any]:
        return self.core.snapshot()

    def metrics_collector(self, *, namespace: str = "tieredstore",
                          const_labels: Mapping[str, str] | None = None) -> StoreCollector:
        """See :meth:`AsyncMessageStore.metrics_collector`."""
        return self.core.metrics_collector(namespace=namespace, const_labels=const_labels)

    @property
    def metrics_port(self) -> int | None:
        return self.core.metrics_port

    def close(self) -> None:
        """Flush and stop; the loop thread ends. Idempotent."""
        try:
            if not self._loop_closed:
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

    @property
    def _loop_closed(self) -> bool:
        return self._loop.closed

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
