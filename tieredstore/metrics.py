"""Prometheus export of the library's counters, on a registry the host passes in.

Nothing here touches ``prometheus_client``'s global default registry: the
host builds a :class:`TieredStoreCollector` over the sources it has (the
object store's :class:`RequestMetrics`, a :class:`Fetcher`, the upload pool,
a message store's queues) and registers it where it wants, e.g.
``register_metrics(registry, store=store.metrics, fetcher=fetcher)``; a
message store builds its own (``metrics_collector``). Each scrape reads the
figures as they are then, from the scraping thread: plain values only,
nothing awaited; the collector keeps no state of its own. ``const_labels``
tell apart several stores or fetchers exported on one registry.

A message store's figures: per queue (labels ``topic`` and ``queue``) its
min, max and commit offsets, its live bytes in the bucket, the bytes appended
and not yet in the bucket (copy lag) and the merges owed; how many queues are
open and corrupt; the bytes the fetcher served per topic and source; and the
requests'
estimated cost in dollars at the configured prices (``price_per_1000_put``:
PUT, COPY, POST and LIST requests; ``price_per_1000_get``: GET and HEAD;
DELETE is free: :class:`~tieredstore.objectstore.governor.Prices`, which the
request governor's dollar ceiling uses too).

The bucket exporter (``tieredstore metrics``, :mod:`tieredstore.store.api.watch`)
exports the same per-queue names from what the bucket holds, read-only, for
every broker of a cluster (a ``broker`` label before ``topic`` and ``queue``), and
a ledger offloader its offload counters. docs/metrics.md lists every name.
Names follow Prometheus' conventions: the ``tieredstore_`` prefix, base units
(bytes, seconds), ``_total`` on counters (added by the client library);
labels are names from the key layout (topic, queue), operations and classes,
never a credential.

The object store's request governor: requests it held back and the seconds
they waited, by priority (``host``, ``read_ahead``, ``compaction``, ``merge``,
``gc``, ``offload``), and the SlowDowns the store answered, by operation and
key prefix.

:class:`MetricsServer` serves a collector over HTTP (``prometheus_client``'s
server, on a registry of its own), bound to ``metrics_host`` (127.0.0.1 by
default) at ``metrics_port``; the store starts one at open when
``metrics_port`` is set and stops it at close.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from tieredstore.errors import ConfigError
from tieredstore.fetcher.fetcher import Fetcher
from tieredstore.objectstore import GET_CLASS, PUT_CLASS, Prices
from tieredstore.objectstore.chokepoint import LATENCY_BUCKETS, RequestMetrics
from tieredstore.segment.pool.metrics import PoolMetrics

# Fetcher counters exported one to one: snapshot key -> (metric name, help).
_FETCHER_COUNTERS = {
    "reads": ("fetcher_reads", "Segment reads served."),
    "store_gets": ("fetcher_store_gets", "Units fetched from the object store (reads and "
                   "read-ahead)."),
    "store_bytes": ("fetcher_store_fetched_bytes", "Bytes of units fetched from the store."),
    "span_gets": ("fetcher_span_gets", "Ranged GETs of a few records' bytes (filtered "
                  "reads), not cached."),
    "coalesced_waits": ("fetcher_coalesced_waits", "Reads that joined a load already in "
                        "flight for the same unit."),
    "readahead_hits": ("fetcher_readahead_hits", "Prefetched units later read."),
    "prefetch_units": ("fetcher_prefetch_units", "Read-ahead loads started."),
    "prefetch_skipped": ("fetcher_prefetch_skipped_units", "Read-ahead units left out to "
                         "stay within the memory budget."),
    "prefetch_waste": ("fetcher_prefetch_waste_units", "Prefetched units evicted or "
                       "forgotten before any read."),
    "prefetch_errors": ("fetcher_prefetch_errors", "Read-ahead loads that failed."),
    "dropped_behind": ("fetcher_dropped_behind_units", "Units a sequential reader read "
                       "through, dropped from memory at once."),
    "committed_units": ("fetcher_committed_units", "Units this process committed, kept "
                        "in memory for tailing readers."),
    "committed_bytes": ("fetcher_committed_bytes", "Bytes of committed units kept in memory."),
    "memory_evictions": ("fetcher_memory_evictions", "Memory-tier entries evicted for room."),
    "disk_writes": ("fetcher_disk_writes", "Units stored in the disk tier."),
    "disk_write_errors": ("fetcher_disk_write_errors", "Disk-tier stores that failed."),
    "disk_errors": ("fetcher_disk_errors", "Disk-tier lookups that failed (the unit was "
                    "fetched from the store)."),
}


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """One queue now, as its writer sees it (a message store) or as the bucket
    holds it (the bucket exporter, :mod:`tieredstore.store.api.watch`). Both export
    the same names; a figure one side cannot know is None, and its series is
    left out: the copy lag only a writer knows (nothing in the bucket records
    it), the segments and message timestamps only the exporter reads."""

    topic: str
    queue_id: int
    min_offset: int
    max_offset: int  # writer: the next offset to be appended; bucket: one past the last durable
    commit_offset: int  # offsets below it are durable in the bucket
    stored_bytes: int  # live bytes in the bucket: commit log, consume queue, key index
    merges_pending: int  # sealed segments whose merge is owed
    copy_lag_bytes: int | None = None  # appended, not yet in the bucket (writer)
    copy_lag_segments: int | None = None  # segments holding such bytes (writer)
    segments: int | None = None  # live segments in the bucket (exporter)
    oldest_ms: int | None = None  # store timestamp of the first live message (exporter)
    newest_ms: int | None = None  # store timestamp of the last durable message (exporter)
    broker: str | None = None  # the queue's broker (the exporter: it reads every broker)


# Per-queue gauges: QueueFigures field -> (metric name after ``queue_``, help, divisor: a
# value is exported divided by it, 1000 for milliseconds as seconds; ms * 0.001 is inexact).
_QUEUE_GAUGES = {
    "min_offset": ("min_offset", "The queue's first live offset.", 1),
    "max_offset": ("max_offset", "A writer: the offset the queue's next append gets; the "
                   "bucket exporter: one past the last offset durable in the bucket.", 1),
    "commit_offset": ("commit_offset", "Offsets below it are durable in the bucket.", 1),
    "stored_bytes": ("stored_bytes", "Live bytes of the queue in the bucket (commit log, "
                     "consume queue, key index).", 1),
    "merges_pending": ("merges_pending", "Sealed segments of the queue whose merge is owed.",
                       1),
    "copy_lag_bytes": ("copy_lag_bytes", "Bytes appended to the queue and not yet in the "
                       "bucket (a writer only).", 1),
    "copy_lag_segments": ("copy_lag_segments", "Segments of the queue holding bytes not yet "
                          "in the bucket (a writer only).", 1),
    "segments": ("segments", "Live segments of the queue in the bucket (commit log, consume "
                 "queue, key index; the bucket exporter only).", 1),
    "oldest_ms": ("oldest_message_timestamp_seconds", "Store time of the queue's first live "
                  "message (the bucket exporter only).", 1000),
    "newest_ms": ("newest_message_timestamp_seconds", "Store time of the queue's last "
                  "durable message (the bucket exporter only).", 1000),
}


@dataclass(slots=True)
class OffloadMetrics:
    """Counters of one ledger offloader: ledgers, entries and bytes offloaded
    (counted when an offload completes), and offloads that failed. Updated on
    the event loop's thread, read whole by a scrape."""

    ledgers: int = 0
    entries: int = 0
    bytes: int = 0
    failures: int = 0


@dataclass(slots=True)
class RefreshMetrics:
    """The bucket exporter's passes over the bucket (:mod:`tieredstore.store.api.watch`):
    how many, their seconds, the queues they could not read, when the last one
    ended and the requests it made."""

    refreshes: int = 0
    seconds: float = 0.0
    queue_errors: int = 0
    last_ended: float = 0.0  # seconds since the epoch; 0: none yet
    last_requests: int = 0
    # Each broker's newest writer as its liveness record says at the last pass:
    # (broker, writer id, state, last seen in seconds since the epoch).
    writers: list[tuple[str, str, str, float]] = dataclass_field(default_factory=list)


class TieredStoreCollector(Collector):
    """Exports object-store request metrics, fetcher and upload pool metrics, a
    message store's figures (``queues``, ``corrupt``: the count of corrupt
    queues, ``prices``: for the requests' cost), a ledger offloader's counters
    (``offload``) and the bucket exporter's passes (``refresh``), each optional.
    ``per_broker``: the per-queue series carry a ``broker`` label before
    ``topic`` and ``queue`` (the bucket exporter, which reads every broker of a
    cluster; a writer's queues are its broker's, which a host names with
    ``const_labels``).
    ``queues`` is called first, so that the request counters a refresh moves
    show in the same scrape."""

    def __init__(
        self,
        *,
        store: RequestMetrics | None = None,
        fetcher: Fetcher | None = None,
        pool: PoolMetrics | None = None,
        queues: Callable[[], Sequence[QueueFigures]] | None = None,
        corrupt: Callable[[], int] = lambda: 0,
        prices: Prices | None = None,
        offload: OffloadMetrics | None = None,
        refresh: RefreshMetrics | None = None,
        namespace: str = "tieredstore",
        const_labels: Mapping[str, str] | None = None,
        per_broker: bool = False,
    ) -> None:
        self.store = store
        self.fetcher = fetcher
        self.pool = pool
        self.queues = queues
        self.corrupt = corrupt
        self.prices = prices
        self.offload = offload
        self.refresh = refresh
        self.namespace = namespace
        self.const_labels = dict(const_labels or {})
        self.per_broker = per_broker

    def describe(self) -> Iterator[Metric]:
        return self.collect()

    def collect(self) -> Iterator[Metric]:
        figures = None if self.queues is None else list(self.queues())
        if self.store is not None:
            yield from self._store_metrics(self.store)
        if self.fetcher is not None:
            yield from self._fetcher_metrics(self.fetcher.snapshot())
        if self.pool is not None:
            yield from self._pool_metrics(self.pool)
        if figures is not None:
            yield from self._queue_metrics(figures)
        if self.prices is not None:
            yield self._cost(self.prices)
        if self.offload is not None:
            yield from self._offload_metrics(self.offload)
        if self.refresh is not None:
            yield from self._refresh_metrics(self.refresh)

    # --- helpers ---------------------------------------------------------------------

    def _name(self, name: str) -> str:
        return f"{self.namespace}_{name}" if self.namespace else name

    def _labels(self, *names: str) -> list[str]:
        return [*self.const_labels, *names]

    def _values(self, *values: str) -> list[str]:
        return [*self.const_labels.values(), *values]

    def _counter(self, name: str, doc: str, *labels: str) -> CounterMetricFamily:
        return CounterMetricFamily(self._name(name), doc, labels=self._labels(*labels))

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        gauge = GaugeMetricFamily(self._name(name), doc, labels=self._labels())
        gauge.add_metric(self._values(), value)
        return gauge

    def _count(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        counter = self._counter(name, doc)
        counter.add_metric(self._values(), value)
        return counter

    def _histogram(self, name: str, doc: str, *labels: str) -> HistogramMetricFamily:
        return HistogramMetricFamily(self._name(name), doc, labels=self._labels(*labels))

    def _add_histogram(self, family: HistogramMetricFamily, labels: Sequence[str],
                       bounds: Sequence[float], counts: Sequence[int], total: float) -> None:
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip(bounds, counts, strict=False):
            cumulative += count
            buckets.append((repr(float(bound)), cumulative))
        buckets.append(("+Inf", cumulative + sum(counts[len(bounds):])))
        family.add_metric(self._values(*labels), buckets, total)

    # --- object store ------------------------------------------------------------------

    def _store_metrics(self, metrics: RequestMetrics) -> Iterator[Metric]:
        snap = metrics.snapshot()
        for key, name, doc in (
            ("requests", "store_requests", "Object-store requests by operation (each attempt)."),
            ("retries", "store_retries", "Retried attempts by operation."),
            ("bytes_up", "store_sent_bytes", "Bytes sent to the store by operation."),
            ("bytes_down", "store_received_bytes", "Bytes received from the store by operation."),
        ):
            family = self._counter(name, doc, "op")
            for op, n in sorted(snap[key].items()):
                family.add_metric(self._values(op), n)
            yield family
        errors = self._counter("store_request_errors", "Failed attempts by operation and "
                               "error type.", "op", "error")
        for key, n in sorted(snap["errors"].items()):
            op, _, error = str(key).partition(":")
            errors.add_metric(self._values(op, error), n)
        yield errors
        latency = self._histogram("store_request_duration_seconds", "Object-store request "
                                  "latency by operation (each attempt).", "op")
        buckets = {op: list(counts) for op, counts in dict(metrics.latency_buckets).items()}
        for op, counts in sorted(buckets.items()):
            self._add_histogram(latency, [op], LATENCY_BUCKETS, counts,
                                float(snap["latency_sum_seconds"].get(op, 0.0)))
        yield latency
        yield from self._governor_metrics(snap)

    def _governor_metrics(self, snap: Mapping[str, Mapping[str, float]]) -> Iterator[Metric]:
        for key, name, doc in (
            ("waits", "store_throttled_requests", "Requests the request governor held back "
             "before sending, by priority."),
            ("wait_seconds", "store_throttled_seconds", "Seconds requests waited for the "
             "request governor, by priority."),
        ):
            family = self._counter(name, doc, "priority")
            for priority, n in sorted(snap[key].items()):
                family.add_metric(self._values(priority), n)
            yield family
        slowdowns = self._counter("store_slowdowns", "Attempts the store answered with "
                                  "SlowDown (503, 429), by operation and key prefix.",
                                  "op", "prefix")
        for key, n in sorted(snap["slowdowns"].items()):
            op, _, prefix = str(key).partition(":")
            slowdowns.add_metric(self._values(op, prefix), n)
        yield slowdowns

    # --- fetcher -------------------------------------------------------------------------

    def _fetcher_metrics(self, snap: Mapping[str, Any]) -> Iterator[Metric]:
        lookups = self._counter("fetcher_lookups", "Unit lookups by cache tier and result.",
                                "tier", "result")
        lookups.add_metric(self._values("memory", "hit"), snap["memory_hits"])
        lookups.add_metric(self._values("memory", "miss"), snap["memory_misses"])
        lookups.add_metric(self._values("disk", "hit"), snap["disk_hits"])
        lookups.add_metric(self._values("disk", "miss"), snap["disk_misses"])
        lookups.add_metric(self._values("disk", "corrupt"), snap["disk_corrupt"])
        yield lookups
        served = self._counter("fetcher_served_bytes", "Bytes returned to readers, by topic "
                               "and by where their unit came from.", "topic", "source")
        for topic, sources in sorted(snap["bytes_by_topic"].items()):
            for source, n in sorted(sources.items()):
                served.add_metric(self._values(topic, source), n)
        yield served
        for key, (name, doc) in _FETCHER_COUNTERS.items():
            yield self._count(name, doc, snap[key])
        for key, name, doc in (
            ("memory_bytes", "fetcher_memory_bytes", "Bytes held by the memory tier."),
            ("memory_budget", "fetcher_memory_budget_bytes", "Byte budget of the memory tier."),
            ("memory_entries", "fetcher_memory_entries", "Units held by the memory tier."),
            ("inflight_loads", "fetcher_inflight_loads", "Unit loads under way."),
        ):
            yield self._gauge(name, doc, snap[key])
        read = snap["read_seconds"]
        latency = self._histogram("fetcher_read_duration_seconds", "Latency of segment reads.")
        self._add_histogram(latency, [], read["bounds"], read["counts"], read["sum"])
        yield latency

    # --- upload buffer pool --------------------------------------------------------------

    def _pool_metrics(self, pool: PoolMetrics) -> Iterator[Metric]:
        for name, doc, value in (
            ("pool_bytes", "Bytes buffered in the upload pool, not yet committed.",
             pool.bytes_in_use),
            ("pool_budget_bytes", "Byte budget of the upload pool.", pool.budget_bytes),
            ("pool_peak_bytes", "Most bytes the upload pool has held at once.",
             pool.peak_bytes_in_use),
        ):
            yield self._gauge(name, doc, value)
        counters: tuple[tuple[str, str, float], ...] = (
            ("pool_appends", "Appends admitted to the pool.", pool.appends),
            ("pool_appended_bytes", "Bytes appended to the pool.", pool.bytes_appended),
            ("pool_waits", "Appends that waited for room (backpressure).", pool.waits),
            ("pool_wait_seconds", "Seconds appends spent waiting for room.", pool.wait_seconds),
            ("pool_buffer_full", "Non-blocking appends refused with BUFFER_FULL.",
             pool.buffer_full),
            ("pool_commit_retries", "Commits retried after a failure.", pool.retries),
            ("pool_committed_bytes", "Bytes committed to segments.", pool.bytes_committed),
        )
        for name, doc, amount in counters:
            yield self._count(name, doc, amount)
        latency = self._histogram("pool_commit_duration_seconds", "Latency of segment commits "
                                  "made by the pool.")
        self._add_histogram(latency, [], LATENCY_BUCKETS, pool.commit_latency,
                            pool.commit_seconds)
        yield latency


    # --- a message store -------------------------------------------------------------------

    def _queue_metrics(self, figures: list[QueueFigures]) -> Iterator[Metric]:
        labels = ("broker", "topic", "queue") if self.per_broker else ("topic", "queue")
        for field, (name, doc, divisor) in _QUEUE_GAUGES.items():
            gauge = GaugeMetricFamily(self._name(f"queue_{name}"), doc,
                                      labels=self._labels(*labels))
            for q in figures:
                value = getattr(q, field)
                if value is None:
                    continue
                names = (q.topic, str(q.queue_id))
                broker = (q.broker or "",) if self.per_broker else ()
                gauge.add_metric(self._values(*broker, *names), value / divisor)
            yield gauge
        yield self._gauge("queues", "Queues open in the store (the bucket exporter: queues "
                          "in the bucket).", len(figures))
        yield self._gauge("corrupt_queues", "Queues whose damage stops appends (the bucket "
                          "exporter: queues its last pass could not read or whose "
                          "metadata is lost, as verify reports them).", self.corrupt())

    def _cost(self, prices: Prices) -> Metric:
        cost = self._counter("store_request_cost_dollars", "Estimated cost of the object-store "
                             "requests made, at the configured prices.", "class")
        requests = {} if self.store is None else self.store.snapshot()["requests"]
        for cls, ops, price in (("put", PUT_CLASS, prices.put), ("get", GET_CLASS, prices.get)):
            count = sum(requests.get(op, 0) for op in ops)
            cost.add_metric(self._values(cls), count * price / 1000)
        return cost


    # --- a ledger offloader, the bucket exporter ----------------------------------------

    def _offload_metrics(self, offload: OffloadMetrics) -> Iterator[Metric]:
        for name, doc, value in (
            ("offload_ledgers", "Ledgers offloaded (completed offloads).", offload.ledgers),
            ("offload_entries", "Entries of the ledgers offloaded.", offload.entries),
            ("offload_bytes", "Entry bytes of the ledgers offloaded.", offload.bytes),
            ("offload_failures", "Offloads that failed.", offload.failures),
        ):
            yield self._count(name, doc, value)

    def _refresh_metrics(self, refresh: RefreshMetrics) -> Iterator[Metric]:
        yield self._count("bucket_refreshes", "Passes over the bucket's queues.",
                          refresh.refreshes)
        yield self._count("bucket_refresh_seconds", "Seconds spent in passes over the "
                          "bucket.", refresh.seconds)
        yield self._count("bucket_refresh_queue_errors", "Queues a pass could not read "
                          "or found with their metadata lost, summed over passes.",
                          refresh.queue_errors)
        yield self._gauge("bucket_refreshed_timestamp_seconds", "When the last pass over "
                          "the bucket ended (0: none yet).", refresh.last_ended)
        yield self._gauge("bucket_refresh_requests", "Object-store requests the last pass "
                          "over the bucket made.", refresh.last_requests)
        seen = GaugeMetricFamily(
            self._name("broker_writer_last_seen_timestamp_seconds"), "When the broker's newest "
            "writer last refreshed its liveness record (labels: its writer id and state: live, "
            "closed, stale, unknown).", labels=self._labels("broker", "writer", "state"))
        for broker, writer, state, at in refresh.writers:
            seen.add_metric(self._values(broker, writer, state), at)
        yield seen


def register_metrics(
    registry: CollectorRegistry,
    *,
    store: RequestMetrics | None = None,
    fetcher: Fetcher | None = None,
    pool: PoolMetrics | None = None,
    offload: OffloadMetrics | None = None,
    namespace: str = "tieredstore",
    const_labels: Mapping[str, str] | None = None,
) -> TieredStoreCollector:
    """Build a :class:`TieredStoreCollector` and register it on ``registry``
    (``offload``: a ledger offloader's ``metrics``)."""
    collector = TieredStoreCollector(store=store, fetcher=fetcher, pool=pool, offload=offload,
                                     namespace=namespace, const_labels=const_labels)
    registry.register(collector)
    return collector


class MetricsServer:
    """An HTTP endpoint serving one collector at ``/metrics`` (any path, in fact)."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @classmethod
    def start(cls, collector: Collector, host: str, port: int) -> MetricsServer:
        """Serve ``collector`` on ``host``:``port``; ``ConfigError`` naming
        ``metrics_port`` if that cannot be bound (in use, a bad address)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        try:
            server, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise ConfigError("metrics_port", f"cannot serve metrics on {host}:{port}: "
                                              f"{exc.strerror or exc}") from None
        return cls(server, thread)

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
