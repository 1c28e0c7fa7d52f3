"""AsyncMessageStore: the message store a host embeds (async core).

``await AsyncMessageStore.open(config)`` claims the broker's log (fencing any
earlier writer: docs/writers.md) and lists every queue from the bucket's
metadata heads. Each queue is claimed when first touched, and the rest in the
background: the claim rebuilds offsets and commit positions, resumes
interrupted seals and merges, and re-dispatches commit-log records the
consume queue had not caught up with. A queue whose data is inconsistent is
reported in ``corrupt`` and refuses appends with that error; what is intact
in it still reads (through a read-only view of the bucket), and the other
queues work.

Over 400 lines because it is the whole writing surface in one class (reads:
:class:`~tieredstore.store.read.reads.QueueReads`): each method checks its arguments
(:mod:`tieredstore.store.base.arguments`) and hands the call to a queue, a view or
the log writer in a few lines; the work lives in those modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import (
    Fenced,
    StoreClosed,
    TieredStoreError,
)
from tieredstore.log import (
    LogFenced,
    LogOptions,
    LogSeries,
    LogWriter,
    WriterGate,
    recover_log,
)
from tieredstore.metadata import liveness
from tieredstore.metrics import MetricsServer, QueueFigures, TieredStoreCollector
from tieredstore.names import validate_name, validate_offset
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import SegmentOptions
from tieredstore.store.api.read_only import ReadOnlyMessageStore
from tieredstore.store.base import arguments, compose
from tieredstore.store.base.context import StoreContext
from tieredstore.store.base.errors import NoSuchQueue, OffsetError, WriterReplaced, passing
from tieredstore.store.base.opening import opening
from tieredstore.store.base.outgoing import Outgoing
from tieredstore.store.formats import keys
from tieredstore.store.formats.codec import KeyProvider, RecordCodec
from tieredstore.store.ops.brokers import refuse_live_writer, writers_prefix
from tieredstore.store.ops.gc import GcReport, collect_garbage
from tieredstore.store.read.reading import QueueReading
from tieredstore.store.read.reads import QueueReads
from tieredstore.store.read.view import listed_queues
from tieredstore.store.write.queue import OwnedQueue
from tieredstore.store.write.recovery import has_segments
from tieredstore.tasks import Priority, gather_bounded

log = logging.getLogger(__name__)

FIGURE_ATTEMPTS = 5

ROLL_CHECK_MAX = 60.0  # seconds between checks for segments old enough to roll, at most

OPEN_CONCURRENCY = 16


class _Claiming:
    """A claim under way and the callers waiting on it, served in the order they
    came: appends issued while a queue is claimed get their offsets in call
    order, and no caller that comes after the claim passes one still waiting."""

    __slots__ = ("lock", "task", "waiting")

    def __init__(self, task: asyncio.Task[OwnedQueue]) -> None:
        self.task = task
        self.lock = asyncio.Lock()  # fair: acquired in the order asked
        self.waiting = 0

    @property
    def failed(self) -> bool:
        """Whether the claim ended in failure: a caller that comes now claims
        again (those still waiting for their turn get the failure)."""
        return self.task.done() and (self.task.cancelled() or
                                     self.task.exception() is not None)

    async def wait(self, done: Callable[[], None]) -> OwnedQueue:
        """The claimed queue, in this caller's turn; ``done()`` once no caller
        waits any more."""
        self.waiting += 1
        try:
            await self.lock.acquire()
        except BaseException:  # cancelled while waiting for its turn
            self.waiting -= 1
            if not self.waiting and not self.lock.locked():
                done()
            raise
        self.waiting -= 1
        try:
            return await asyncio.shield(self.task)
        finally:
            self.lock.release()
            if not self.waiting:
                done()


class AsyncMessageStore(QueueReads):
    """Per-queue commit logs on tiered segments. Use :meth:`open`."""

    def __init__(self, ctx: StoreContext, *, topic_reserved_time: Mapping[str, float]) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self._queues: dict[tuple[str, int], OwnedQueue] = {}
        self._opening: dict[tuple[str, int], _Claiming] = {}
        self._listed: set[tuple[str, int]] = set()  # queues with a head (or log) at open
        self.corrupt: dict[tuple[str, int], TieredStoreError] = {}
        self._intact = ReadOnlyMessageStore(ctx.config, ctx.store, ctx.fetcher,
                                            owns_store=False, codec=ctx.opener)
        self.heartbeat: liveness.Heartbeat | None = None  # this open's liveness record
        self.topic_reserved_time = dict(topic_reserved_time)
        self._closed = False
        self._metrics_server: MetricsServer | None = None

    @classmethod
    @opening
    async def open(
        cls,
        config: TieredStoreConfig | None = None,
        *,
        store: ObjectStore | None = None,
        topic_reserved_time: Mapping[str, float] | None = None,
        writer_id: str | None = None,
        key_provider: KeyProvider | None = None,
        take_over: bool = True,
    ) -> AsyncMessageStore:
        """Open the store on ``config``'s backend (or the given ObjectStore) and recover:
        ``store = await AsyncMessageStore.open(...)``, or ``async with
        AsyncMessageStore.open(...) as store:`` to close it when the block ends.

        An S3 bucket that does not exist is an error naming it (:class:`NoSuchBucket`)
        unless ``s3_create_bucket`` asks to create it. ``key_provider`` maps a key
        id to its key, for ``encryption = "aes-gcm"`` (:mod:`tieredstore.store.formats.codec`).

        The newest open wins: this one fences any store that writes the broker now.
        ``take_over=False`` refuses instead, with :class:`WriterLive` naming it,
        while that store's liveness record is live (docs/writers.md, Liveness
        records); nothing is written then."""
        arguments.check_open(config, store, topic_reserved_time, writer_id, take_over)
        arguments.check_key_provider(key_provider)
        config = config or load_config()
        codec = RecordCodec.from_config(config, key_provider)
        backend = store or compose.open_object_store(config)
        if store is None:
            try:
                await compose.prepare_bucket(backend, config)
            except BaseException:
                await backend.close()
                raise
        ctx = StoreContext(
            config=config,
            store=backend,
            fetcher=compose.open_fetcher(backend, config),
            pool=compose.open_pool(config, backend),
            writer_id=writer_id or f"{config.broker}@{socket.gethostname()}:{os.getpid()}",
            segment_options=config.options(SegmentOptions, join_tail=True),
            codec=codec,
            opener=codec or RecordCodec.from_config(config, strict=False),
        )
        self = cls(ctx, topic_reserved_time=topic_reserved_time or {})
        try:
            if not take_over:
                await refuse_live_writer(ctx.store, config)
            # Before the claim: a polite open or an operator's command that checks
            # once the claim is made sees this store live (docs/writers.md).
            self.heartbeat = await liveness.start(ctx.store, writers_prefix(config),
                                                  ctx.writer_id, config.heartbeat_interval)
            await self._open_log()
            await self._recover()
        except BaseException:
            with contextlib.suppress(Exception):
                await self.close()  # releases the client, the pool, the fetcher
            raise
        background = ctx.background
        if config.heartbeat_interval > 0:
            background.every(config.heartbeat_interval, "liveness record",
                             self.heartbeat.beat)
        background.every(max(0.01, config.group_commit_interval), "dispatch", self._tick)
        if config.gc_interval > 0:
            background.every(config.gc_interval, "garbage collection", self.collect_garbage,
                             priority=Priority.GC)
        if config.rolling_interval > 0:
            every = max(0.01, min(ROLL_CHECK_MAX, config.rolling_interval / 10))
            background.every(every, "rolling by time", self._roll_old, priority=Priority.MERGE)
        if ctx.log is not None:
            background.every(ctx.log.options.check_every, "log compaction", self.compact_log,
                             priority=Priority.COMPACTION)
        if config.retention_interval > 0:
            background.every(config.retention_interval, "retention", self.delete_expired,
                             priority=Priority.GC)
        if config.metrics_port:
            try:
                self._metrics_server = MetricsServer.start(
                    self.metrics_collector(), config.metrics_host, config.metrics_port)
            except BaseException:
                await self.close()
                raise
        return self

    @property
    def damaged(self) -> dict[tuple[str, int], list[str]]:
        """Open queues that read around bytes missing from the bucket in their
        open segments, and what is missing (docs/damage.md, Damage in the bucket)."""
        return {key: queue.damage for key, queue in self._queues.items() if queue.damage}

    @staticmethod
    @opening
    async def open_read_only(config: TieredStoreConfig | None = None, *,
                             store: ObjectStore | None = None,
                             key_provider: KeyProvider | None = None) -> ReadOnlyMessageStore:
        """The same queues, for reading only: never writes, never fences a writer
        (see :mod:`tieredstore.store.api.read_only`)."""
        return await ReadOnlyMessageStore.open(config, store=store, key_provider=key_provider)

    async def _open_log(self) -> None:
        """Claim the broker's log and read what it holds, in either write mode:
        the store replaced may be a log-mode one, idle or busy, and its next log
        object must meet our fence (docs/log-objects.md, "Across the two write
        modes"). Only the log mode sends commits to it; the direct mode moves
        the pieces a log-mode store left into chunks, and deletes old fences."""
        ctx = self.ctx
        options = self.config.options(LogOptions)
        series = LogSeries(ctx.store, keys.log_path(self.config), uuid.uuid4().hex,
                           recheck_after=options.delete_age / 2)
        writer = LogWriter(ctx.store, series, options)
        await recover_log(writer)
        ctx.log = writer
        ctx.gate = WriterGate(series.check)
        ctx.pool.check_commits_with(ctx.gate.passed_since)
        if self.config.write_mode == "log":
            ctx.pool.send_small_commits_to(writer)

    async def _recover(self) -> None:
        """List the broker's queues (with those whose bytes are all in the log);
        claim none: each is claimed when first touched, and the rest by
        :meth:`_claim_listed` in the background (docs/writers.md, "The open")."""
        found = await listed_queues(self.ctx.store, self.config, log=self.ctx.log)
        self._listed = set(found)
        if found and self.config.claim_concurrency:
            self.ctx.background.spawn(
                self._claim_listed(found, self.config.claim_concurrency),
                "claiming the queues", priority=Priority.MERGE)

    async def _claim_listed(self, found: Sequence[tuple[str, int]],
                            concurrency: int = OPEN_CONCURRENCY) -> None:
        """Claim every queue listed at the open, ``concurrency`` at a time (those
        touched meanwhile are claimed already, or being claimed)."""
        async def one(topic: str, queue_id: int) -> None:
            try:
                await self._queue(topic, queue_id, create=False)
            except Fenced as exc:
                log.warning("queue %s/%d not claimed: %s", topic, queue_id, exc)
            except TieredStoreError as exc:
                if (topic, queue_id) not in self.corrupt:  # corrupt: _claim logged it
                    # The store was unreachable (a re-dispatch's commit failed after
                    # the retries, say): the next access opens it.
                    log.warning("queue %s/%d could not be opened now: %s", topic, queue_id,
                                exc)

        await gather_bounded(concurrency, lambda q: one(*q), found)

    async def _tick(self) -> None:
        """Dispatch what group commits made durable (every group-commit interval)."""
        # A plain look at each queue: a broker of many quiet queues ticks every
        # group-commit interval.
        for queue in [q for q in self._queues.values() if q.dispatching]:
            with contextlib.suppress(TieredStoreError):
                await queue.tick()

    async def _roll_old(self) -> None:
        """Roll the queues whose active segments are ``rolling_interval`` old."""
        now = arguments.now_ms()
        for (topic, queue_id), queue in list(self._queues.items()):
            try:
                await queue.roll_if_old(now)
            except TieredStoreError as exc:  # the next check tries again
                log.warning("%s/%d: rolling by time failed: %s", topic, queue_id, exc)

    async def collect_garbage(self, *, dry_run: bool = False,
                              safety_age: float | None = None) -> GcReport:
        """One garbage-collection pass over this store's queues and the logs of
        its cluster's brokers (see :mod:`tieredstore.store.ops.gc`): what nothing
        needs and is older than ``safety_age`` (default ``gc_safety_age``) seconds."""
        age = self.config.gc_safety_age if safety_age is None else safety_age
        await self._claim_all()
        metas = [q.meta for q in list(self._queues.values())]
        return await collect_garbage(self.ctx.store, self.config, metas, safety_age=age,
                                     dry_run=dry_run)

    async def compact_log(self, now: float | None = None) -> None:
        """One pass of what runs in the background in write mode log: move the
        pieces of log objects ``log_compact_age`` old (at ``now``, seconds since
        the epoch; default the clock) into chunks, and delete the log objects
        left without a piece that are ``gc_safety_age`` old. Nothing to do when
        the store has no log."""
        arguments.check_now(now)
        if self.ctx.log is not None:
            # Pieces move into chunks of the queues' segments: those queues are claimed.
            await self._claim_all(self.ctx.log.queues())
            await self.ctx.log.maintain(now)

    # --- queues -----------------------------------------------------------------------

    def queues(self) -> list[tuple[str, int]]:
        """Every queue of the broker: held, listed at the open (claimed when
        first touched), or corrupt."""
        return sorted({*self._queues, *self._listed, *self.corrupt})

    async def _queue(self, topic: str, queue_id: int, *, create: bool) -> OwnedQueue:
        if self._closed:
            raise StoreClosed("the message store is closed")
        if type(topic) is str and type(queue_id) is int:  # held queues: names checked
            queue = self._queues.get((topic, queue_id))
            if queue is not None and (topic, queue_id) not in self._opening:
                return queue
        key = (validate_name("topic", topic), validate_offset("queue_id", queue_id))
        queue = self._queues.get(key)
        if queue is not None and key not in self._opening:
            return queue
        if key in self.corrupt:
            raise self.corrupt[key]
        claiming = self._opening.get(key)
        if claiming is not None and claiming.failed:
            claiming = None  # its failure is for those who came before it ended
        if claiming is None:
            if not create and key not in self._listed and not self.ctx.in_log(*key) \
                    and not await has_segments(self.ctx, *key):
                # No head listed at open (one whose open failed then opens now) and
                # no segment: no such queue. (With segments but no head, opening it
                # rebuilds its metadata from them.)
                raise NoSuchQueue(topic, queue_id)
            claiming = self._opening.get(key)
            if claiming is None or claiming.failed:
                claiming = _Claiming(asyncio.get_running_loop().create_task(self._hold(key)))
                self._opening[key] = claiming

        def done() -> None:  # later callers take the held queue (or claim again)
            if self._opening.get(key) is claiming:
                del self._opening[key]
        return await claiming.wait(done)

    async def _hold(self, key: tuple[str, int]) -> OwnedQueue:
        """Claim the queue and hold it (flushes and passes see it from now on)."""
        queue = await self._claim(*key)
        self._queues[key] = queue
        return queue

    async def _claim(self, topic: str, queue_id: int) -> OwnedQueue:
        """Open and claim a queue this store does not hold yet, if it is still the
        newest store of the broker (the writer check before and after:
        docs/writers.md, "Claim"). A queue found corrupt is recorded as such."""
        gate = self.ctx.gate
        assert gate is not None
        try:
            await gate.check_now()
            try:
                queue = await OwnedQueue.open(self.ctx, topic, queue_id)
            except (Fenced, StoreClosed):
                raise
            except TieredStoreError as exc:
                if passing(exc):
                    raise
                log.error("queue %s/%d is corrupt: %s", topic, queue_id, exc)
                self.corrupt[(topic, queue_id)] = exc
                raise
            try:
                await gate.check_now()  # replaced meanwhile: give the queue up unwritten
            except BaseException:
                await queue.abandon()
                raise
        except LogFenced as exc:
            raise WriterReplaced(f"{topic}/{queue_id} not claimed: {exc}") from None
        return queue

    async def _claim_all(self, of: set[tuple[str, int]] | None = None) -> None:
        """Claim every queue of ``of`` (default: those listed at the open) that is
        not held yet, for a pass over them (retention, GC, compaction)."""
        await self._claim_listed(self._unheld(self._listed if of is None else of))

    def _unheld(self, keys: set[tuple[str, int]]) -> list[tuple[str, int]]:
        return sorted(keys - self._queues.keys() - self.corrupt.keys())

    # --- the API ---------------------------------------------------------------------------

    async def append(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        *,
        keys: Sequence[str] = (),
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        timestamp: int | None = None,
        offset: int | None = None,
    ) -> int:
        """Append one message; returns its offset. Durable after :meth:`flush`.

        Every argument is checked first (see :mod:`tieredstore.store.base.arguments`):
        a bad one raises and nothing is written."""
        message = arguments.check_append(
            topic, queue_id, body, keys=keys, tags=tags, properties=properties,
            timestamp=timestamp, offset=offset, config=self.config,
            topic_reserved_time=self.topic_reserved_time)
        queue = await self._queue_to_append(topic, queue_id, offset)
        return await queue.append(message, offset)

    async def append_batch(self, topic: str, queue_id: int,
                           messages: Sequence[bytes | Outgoing]) -> range:
        """Append ``messages`` (bodies, or :class:`Outgoing` with keys, tags,
        properties and a timestamp) to one queue, in order; returns their offsets.
        Durable after :meth:`flush`.

        Much cheaper per message than :meth:`append`: the arguments, the queue
        and its lock are taken once, and records go to the upload buffer in runs.
        Every message is checked first: a bad one raises naming its index and
        nothing of the batch is written. A failure once writing began (a roll
        that cannot land) leaves the messages before it appended."""
        batch = arguments.check_batch(topic, queue_id, messages, config=self.config,
                                      topic_reserved_time=self.topic_reserved_time)
        return await self.append_checked(topic, queue_id, batch)

    async def append_checked(self, topic: str, queue_id: int, batch: Sequence[Outgoing],
                             first_offset: int | None = None) -> range:
        """:meth:`append_batch` for messages ``arguments.check_batch`` (or
        ``check_append``) passed already, with bytes bodies and tuple keys;
        ``first_offset``, if given, must be the queue's next offset (else
        ``OffsetError`` and nothing is appended)."""
        queue = await self._queue_to_append(topic, queue_id, first_offset)
        if not batch:
            return range(queue.next_offset, queue.next_offset)
        first = await queue.append_batch(batch, first_offset)
        return range(first, first + len(batch))

    async def _queue_to_append(self, topic: str, queue_id: int, offset: int | None
                               ) -> OwnedQueue:
        """The queue, created if new; but an ``offset`` past 0 for a new queue is
        refused before it is created: a refused append stores nothing."""
        if (offset is not None and offset != 0 and (topic, queue_id) not in self._queues
                and (topic, queue_id) not in self.corrupt
                and not await has_segments(self.ctx, topic, queue_id)):
            raise OffsetError(f"offset {offset} would be a gap: the queue is new, its next "
                              "offset is 0", topic=topic, queue_id=queue_id)
        return await self._queue(topic, queue_id, create=True)

    async def flush(self) -> None:
        """Returns when every append before it is durable in the object store."""
        if self._closed:
            raise StoreClosed("the message store is closed")
        await asyncio.gather(*(q.flush() for q in list(self._queues.values())))

    async def _reading(self, topic: str, queue_id: int, *, at: int | None = None,
                       fresh: bool = False) -> QueueReading:
        """The queue to read from (it sees every append: ``at`` and ``fresh`` change
        nothing). A corrupt queue takes no append, but what is intact in it still
        reads: through the read-only store's view of the bucket."""
        key = (topic, queue_id)
        if key not in self.corrupt:
            try:
                return await self._queue(topic, queue_id, create=False)
            except TieredStoreError:
                if key not in self.corrupt:  # found corrupt by this first touch
                    raise
        try:
            return await self._intact.queue(topic, queue_id)
        except TieredStoreError:
            raise self.corrupt[key] from None

    async def _readings(self, topic: str) -> list[QueueReading]:
        """The queues of ``topic`` this store holds, those listed at the open
        claimed first (a claim that fails raises: a read of the topic leaves no
        queue out unsaid; a queue found corrupt is left out, as a held one is)."""
        if self._closed:
            raise StoreClosed("the message store is closed")

        async def claim(key: tuple[str, int]) -> None:
            try:
                await self._queue(*key, create=False)
            except TieredStoreError:
                if key not in self.corrupt:
                    raise

        await gather_bounded(OPEN_CONCURRENCY, claim,
                             self._unheld({k for k in self._listed if k[0] == topic}))
        return [q for (t, _), q in sorted(self._queues.items()) if t == topic]

    async def commit_offset(self, topic: str, queue_id: int) -> int:
        """Offsets below this are durable in the object store."""
        arguments.check_queue(topic, queue_id)
        return (await self._queue(topic, queue_id, create=False)).commit_offset

    async def delete_expired(self, now: float | None = None) -> int:
        """Delete segments whose newest message is older than the reserved time
        (``file_reserved_time``, or the topic's override). Returns segments deleted.
        ``now`` is seconds since the epoch (default: the clock)."""
        arguments.check_now(now)
        now_s = time.time() if now is None else now
        deleted = 0
        await self._claim_all()
        for (topic, _), queue in list(self._queues.items()):
            reserved, _ = arguments.topic_retention(self.config, self.topic_reserved_time,
                                                    topic)
            deleted += await queue.delete_expired(int((now_s - reserved) * 1000))
        return deleted

    def metrics_collector(self, *, namespace: str = "tieredstore",
                          const_labels: Mapping[str, str] | None = None
                          ) -> TieredStoreCollector:
        """This store's Prometheus collector (see :mod:`tieredstore.metrics`):
        register it on the host's registry (``registry.register(collector)``),
        or let the store serve it (``metrics_port``)."""
        ctx = self.ctx
        return TieredStoreCollector(store=ctx.store.metrics, fetcher=ctx.fetcher,
                                    pool=ctx.pool.metrics, queues=self._figures,
                                    corrupt=lambda: len(self.corrupt),
                                    prices=compose.request_prices(self.config),
                                    namespace=namespace, const_labels=const_labels)

    def _figures(self) -> list[QueueFigures]:
        # Called on the scraping thread while the loop goes on: a queue's pending
        # units may change under the walk; walk again (then leave the gauges out).
        for _ in range(FIGURE_ATTEMPTS):
            try:
                return [queue.figures() for _, queue in sorted(list(self._queues.items()))]
            except RuntimeError:  # "deque mutated during iteration" and the like
                continue
        return []

    @property
    def metrics_port(self) -> int | None:
        """The port of the metrics endpoint the store serves, if it serves one."""
        return None if self._metrics_server is None else self._metrics_server.port

    def snapshot(self) -> dict[str, Any]:
        """Counters of every layer, as plain dicts."""
        return {
            "requests": self.ctx.store.metrics.snapshot(),
            "fetcher": self.ctx.fetcher.snapshot(),
            "pool": self.ctx.pool.snapshot(),
            "queues": len(self._queues),
            "log": self.ctx.log.snapshot() if self.ctx.log is not None else {},
            "corrupt": {f"{t}/{q}": str(e) for (t, q), e in self.corrupt.items()},
        }

    async def close(self) -> None:
        """Flush, finish background merges, release connections. Idempotent.

        Everything is released whatever fails on the way (a fenced flush, say):
        background tasks, the upload pool, the fetcher, the object store's
        client and the metrics endpoint; then the first failure is raised."""
        if self._closed:
            return
        first: BaseException | None = None
        for step in (self.flush, self._stop_background, self._close_heartbeat, self.ctx.pool.close,
                     self.ctx.fetcher.close, self.ctx.store.close, self._stop_metrics):
            try:
                await step()
            except BaseException as exc:  # raised below, after the rest
                first = first or exc
            self._closed = True
        if first is not None:
            raise first

    async def _close_heartbeat(self) -> None:
        if self.heartbeat is not None:
            await self.heartbeat.close()

    async def _stop_background(self) -> None:
        await self.ctx.background.close()  # the periodic passes first, then merges
        if self.ctx.log is not None:
            await self.ctx.log.background.close()

    async def wait_idle(self) -> None:
        """Return once the background work under way has finished (the pool's due
        commits, the log's group commits and compactions, merges, the fetcher's
        loads and disk writes, and what they started meanwhile; not the periodic
        passes). Makes nothing due (that is :meth:`flush`) and raises nothing: a
        failure is logged (see :mod:`tieredstore.tasks`). For tests, benchmarks,
        and hosts that want merges done before they look."""
        ctx = self.ctx
        parts = [ctx.pool.wait_idle, ctx.background.wait_idle, ctx.fetcher.wait_idle]
        if ctx.log is not None:
            parts.insert(1, ctx.log.background.wait_idle)
        while True:  # until a round finds every part idle
            waited = [await wait() for wait in parts]
            if not any(waited):
                return

    async def _stop_metrics(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.stop()

    async def __aenter__(self) -> AsyncMessageStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
