"""BucketWatch: every queue's figures as the bucket holds them, read-only, for
every broker of a cluster; what ``tieredstore metrics`` serves beside live writers.

A pass (:meth:`BucketWatch.refresh`) computes, for every queue an open would
find on each broker the :class:`ReadOnlyCluster` reads, what ``tieredstore
inspect`` shows (:func:`summarize`: never a write, never a claim, so a writer
is never fenced), as :class:`~tieredstore.metrics.QueueFigures` under the
names a writer exports, with the queue's broker: offsets, live bytes and
segments, merges owed, the store times of the first and last message. The
copy lag is not among them: a writer records nothing about its unflushed
bytes in the bucket, so only the writer's own metrics have it.

A scrape (:meth:`BucketWatch.figures`) answers from the last pass while it is
younger than ``min_interval`` seconds, else runs one pass first; concurrent
scrapes share it. So a scrape costs at most one pass, and a pass, with B
brokers, Q queues and L log objects holding bytes (docs/metrics.md has
measured figures):

- the cluster's brokers: one paged LIST of its metadata root (none when the
  reader was opened with a selection of brokers);
- per broker: one paged LIST of its log and one ranged GET per log object
  written since the last pass (:meth:`LogSnapshot.load`: log objects never
  change, so their indexes are kept), one paged LIST of its queue heads;
- per queue: a LIST and a GET of its head, a LIST of the consume queue's and
  of the commit log's open segment (more if a writer sealed one and has not
  recorded it yet) and a read of its last consume-queue unit (the newest
  timestamp); when its first offset moved since the last pass, a LIST of the
  segment holding it and a ranged GET of its unit (the oldest timestamp);
  when its head changed, one paged LIST per flat file (the key index too, if
  it has one) to count its recorded segments (:func:`summarize` with
  ``known``: a head at the same version records the same segments).

- the queues whose metadata is lost (:func:`queues_to_rebuild`, what
  ``verify`` reports and ``repair`` rebuilds): one paged LIST of every key
  under ``key_prefix`` for all brokers, and per broker one more paged LIST of
  its heads (the logs as loaded above; the heads the pass read are not read
  again). They count among the queues the pass could not read
  (``tieredstore_corrupt_queues``).
- per broker, its newest writer: one LIST and one GET of its liveness record
  (``tieredstore_broker_writer_last_seen_timestamp_seconds``).

No message body is read. The
requests the last pass made are exported
(``tieredstore_bucket_refresh_requests``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from prometheus_client.metrics_core import Metric

from tieredstore.errors import TieredStoreError
from tieredstore.log import LogIndexes
from tieredstore.metrics import MetricsServer, QueueFigures, RefreshMetrics, TieredStoreCollector
from tieredstore.store.api.cluster import ClusterQueue, ReadOnlyCluster
from tieredstore.store.base.compose import request_prices
from tieredstore.store.base.errors import NoSuchQueue
from tieredstore.store.ops.brokers import writer_seen
from tieredstore.store.ops.summary import QueueSummary, summarize
from tieredstore.store.read.view import listed_queues, load_log
from tieredstore.store.write.recovery import queues_to_rebuild, store_keys
from tieredstore.tasks import gather_bounded

QUEUE_CONCURRENCY = 8
SCRAPE_TIMEOUT = 60.0  # seconds a scrape waits for its pass


class BucketWatch:
    """The figures of every queue of ``reader``'s brokers, a pass at most every
    ``min_interval`` seconds. Runs on ``reader``'s event loop."""

    def __init__(self, reader: ReadOnlyCluster, *, min_interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not min_interval >= 0:
            raise ValueError(f"min_interval must be at least 0 seconds, got {min_interval}")
        self.reader = reader
        self.min_interval = min_interval
        self.metrics = RefreshMetrics()
        self.unreadable = 0  # queues the last pass could not read, or whose metadata is lost
        self._clock = clock
        self._figures: list[QueueFigures] = []
        self._at: float | None = None  # when the last pass that ended started
        self._lock = asyncio.Lock()
        # Each broker's log objects never change: their indexes are kept.
        self._indexes: dict[str, LogIndexes] = {}
        self._summaries: dict[ClusterQueue, QueueSummary] = {}  # the last pass's

    async def figures(self) -> list[QueueFigures]:
        """The last pass's figures, after a new pass if it is ``min_interval`` old.
        A scrape that waited for a pass under way takes that pass's figures, however
        long it took: otherwise each waiting scrape made a pass of its own after it,
        and scrapes coming faster than passes end (a pass longer than the scrape
        timeout) queued passes without bound."""
        ended = self.metrics.refreshes  # passes ended before this scrape came
        async with self._lock:
            if self.metrics.refreshes > ended:
                return self._figures  # one ended while this scrape waited
            if self._at is None or self._clock() - self._at >= self.min_interval:
                await self.refresh()
            return self._figures

    async def refresh(self) -> list[QueueFigures]:
        """One pass over the bucket (see the module doc for its requests). One that
        raises is not a pass: the figures stay unset, and the next scrape tries again
        rather than answering with the figures of the pass before."""
        at = self._clock()
        started = time.perf_counter()
        reader = self.reader
        requests = reader.store.metrics
        before = sum(requests.snapshot()["requests"].values())
        store = reader.store
        brokers = await reader.brokers(fresh=True)
        self._indexes = {b: self._indexes[b] if b in self._indexes else LogIndexes()
                         for b in brokers}
        logs = {b: await load_log(store, reader.config_of(b), self._indexes[b]) for b in brokers}
        queues = [(b, t, q) for b in brokers for t, q in await listed_queues(
            store, reader.config_of(b), log=logs[b])]
        unreadable: list[ClusterQueue] = []

        async def one(queue: ClusterQueue) -> QueueSummary | None:
            broker, topic, queue_id = queue
            try:
                return await summarize(store, reader.config_of(broker), topic, queue_id,
                                       reader.fetcher, log=logs[broker],
                                       known=self._summaries.get(queue))
            except NoSuchQueue:  # gone since the listing
                return None
            except TieredStoreError:
                unreadable.append(queue)
                return None

        got = await gather_bounded(QUEUE_CONCURRENCY, one, queues)
        self._summaries = {q: s for q, s in zip(queues, got, strict=True) if s is not None}
        # What verify reports and repair rebuilds: segments whose heads are lost.
        keys = await store_keys(store, reader.config)
        lost: set[ClusterQueue] = set()
        for b in brokers:
            opened = {(t, q) for broker, t, q in self._summaries if broker == b}
            lost |= {(b, topic, queue_id) for topic, queue_id, _ in await queues_to_rebuild(
                store, reader.config_of(b), log=logs[b], opened=opened, keys=keys)}
        self._figures = [figures(s, q[0]) for q, s in self._summaries.items()]
        seen = {b: await writer_seen(store, reader.config_of(b)) for b in brokers}
        self._at = at
        self.unreadable = len(lost | set(unreadable))
        m = self.metrics
        m.refreshes += 1
        m.queue_errors += self.unreadable
        m.seconds += time.perf_counter() - started
        m.last_ended = time.time()
        m.last_requests = int(sum(requests.snapshot()["requests"].values()) - before)
        m.writers = [(b, s.writer, s.state(m.last_ended), s.seen_ms / 1000)
                     for b, s in seen.items() if s is not None]
        return self._figures


def figures(summary: QueueSummary, broker: str) -> QueueFigures:
    """A summary of a queue of ``broker`` under the names a writer's figures have
    (all of it is durable: the commit offset is the end)."""
    s = summary
    return QueueFigures(
        s.topic, s.queue_id, min_offset=s.min_offset, max_offset=s.max_offset,
        commit_offset=s.max_offset,
        stored_bytes=s.commit_log.bytes + s.consume_queue.bytes + s.index.bytes,
        merges_pending=s.merges_pending, segments=s.segments, oldest_ms=s.oldest_ms,
        newest_ms=s.newest_ms, broker=broker)


async def serve_bucket_metrics(reader: ReadOnlyCluster, host: str, port: int, *,
                               min_interval: float,
                               on_ready: Callable[[int], None] = lambda port: None) -> None:
    """Serve the figures of ``reader``'s brokers (a :class:`BucketWatch`), the
    requests this process made and their cost, at ``http://host:port/metrics``
    until cancelled; ``on_ready(port)`` once it listens (port 0: a free one),
    after a first pass.
    A scrape waits for the pass it needs on this loop; a pass that fails
    fails the scrape (HTTP 500)."""
    watch = BucketWatch(reader, min_interval=min_interval)
    loop = asyncio.get_running_loop()

    def queues() -> list[QueueFigures]:  # on the HTTP server's thread
        return asyncio.run_coroutine_threadsafe(watch.figures(), loop).result(SCRAPE_TIMEOUT)

    collector = bucket_collector(watch, queues)
    # Registering the collector describes it, that is collects it: a first pass,
    # run on this loop while the server starts on a thread of its own.
    server = await asyncio.to_thread(MetricsServer.start, collector, host, port)
    try:
        on_ready(server.port)
        await asyncio.Event().wait()
    finally:
        await asyncio.to_thread(server.stop)


def bucket_collector(watch: BucketWatch, queues: Callable[[], Sequence[QueueFigures]]
                     ) -> TieredStoreCollector:
    """What the exporter serves: ``queues`` (``watch``'s figures), the queues
    its last pass could not read, this process's requests and their cost, and
    the passes (``tieredstore_bucket_*``)."""
    reader = watch.reader
    return TieredStoreCollector(
        store=reader.store.metrics, queues=queues, corrupt=lambda: watch.unreadable,
        prices=request_prices(reader.config), refresh=watch.metrics, per_broker=True)


async def scrape_bucket(reader: ReadOnlyCluster) -> list[Metric]:
    """One pass over ``reader``'s brokers, collected as a scrape of
    :func:`serve_bucket_metrics` would serve it after that pass: the same
    families, names and values (``tieredstore metrics`` without ``--listen``)."""
    watch = BucketWatch(reader, min_interval=0)
    got = await watch.refresh()
    return list(bucket_collector(watch, lambda: got).collect())
