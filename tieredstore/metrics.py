"""Prometheus export of the library's counters, on a registry the host passes in.

Nothing here touches ``prometheus_client``'s global default registry: the
host builds a :class:`TieredStoreCollector` over the sources it has (the
object store's :class:`RequestMetrics`, a :class:`Fetcher`) and registers it
where it wants, e.g. ``register_metrics(registry, store=store.metrics,
fetcher=fetcher)``. Each scrape reads the counters as they are then; the
collector keeps no state of its own. ``const_labels`` tell apart several
stores or fetchers exported on one registry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from tieredstore.fetcher.fetcher import Fetcher
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


class TieredStoreCollector(Collector):
    """Exports object-store request metrics and fetcher metrics, either optional."""

    def __init__(
        self,
        *,
        store: RequestMetrics | None = None,
        fetcher: Fetcher | None = None,
        pool: PoolMetrics | None = None,
        namespace: str = "tieredstore",
        const_labels: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        self.fetcher = fetcher
        self.pool = pool
        self.namespace = namespace
        self.const_labels = dict(const_labels or {})

    def describe(self) -> Iterator[Metric]:
        return self.collect()

    def collect(self) -> Iterator[Metric]:
        if self.store is not None:
            yield from self._store_metrics(self.store)
        if self.fetcher is not None:
            yield from self._fetcher_metrics(self.fetcher.snapshot())
        if self.pool is not None:
            yield from self._pool_metrics(self.pool)

    # --- helpers ---------------------------------------------------------------------

    def _name(self, name: str) -> str:
        return f"{self.namespace}_{name}" if self.namespace else name

    def _labels(self, *names: str) -> list[str]:
        return [*self.const_labels, *names]

    def _values(self, *values: str) -> list[str]:
        return [*self.const_labels.values(), *values]

    def _counter(self, name: str, doc: str, *labels: str) -> CounterMetricFamily:
        return CounterMetricFamily(self._name(name), doc, labels=self._labels(*labels))

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
        requests = self._counter("store_requests", "Object-store requests by operation "
                                 "(each attempt).", "op")
        for op, n in sorted(snap["requests"].items()):
            requests.add_metric(self._values(op), n)
        yield requests
        retries = self._counter("store_retries", "Retried attempts by operation.", "op")
        for op, n in sorted(snap["retries"].items()):
            retries.add_metric(self._values(op), n)
        yield retries
        errors = self._counter("store_request_errors", "Failed attempts by operation and "
                               "error type.", "op", "error")
        for key, n in sorted(snap["errors"].items()):
            op, _, error = str(key).partition(":")
            errors.add_metric(self._values(op, error), n)
        yield errors
        sent = self._counter("store_sent_bytes", "Bytes sent to the store by operation.", "op")
        for op, n in sorted(snap["bytes_up"].items()):
            sent.add_metric(self._values(op), n)
        yield sent
        received = self._counter("store_received_bytes", "Bytes received from the store by "
                                 "operation.", "op")
        for op, n in sorted(snap["bytes_down"].items()):
            received.add_metric(self._values(op), n)
        yield received
        latency = self._histogram("store_request_duration_seconds", "Object-store request "
                                  "latency by operation (each attempt).", "op")
        buckets = {op: list(counts) for op, counts in dict(metrics.latency_buckets).items()}
        for op, counts in sorted(buckets.items()):
            self._add_histogram(latency, [op], LATENCY_BUCKETS, counts,
                                float(snap["latency_sum_seconds"].get(op, 0.0)))
        yield latency

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
        served = self._counter("fetcher_served_bytes", "Bytes returned to readers, by where "
                               "their unit came from.", "source")
        for source in ("memory", "disk", "store"):
            served.add_metric(self._values(source), snap[f"bytes_from_{source}"])
        yield served
        for key, (name, doc) in _FETCHER_COUNTERS.items():
            family = self._counter(name, doc)
            family.add_metric(self._values(), snap[key])
            yield family
        for key, name, doc in (
            ("memory_bytes", "fetcher_memory_bytes", "Bytes held by the memory tier."),
            ("memory_budget", "fetcher_memory_budget_bytes", "Byte budget of the memory tier."),
            ("memory_entries", "fetcher_memory_entries", "Units held by the memory tier."),
            ("inflight_loads", "fetcher_inflight_loads", "Unit loads under way."),
        ):
            gauge = GaugeMetricFamily(self._name(name), doc, labels=self._labels())
            gauge.add_metric(self._values(), snap[key])
            yield gauge
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
            gauge = GaugeMetricFamily(self._name(name), doc, labels=self._labels())
            gauge.add_metric(self._values(), value)
            yield gauge
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
            family = self._counter(name, doc)
            family.add_metric(self._values(), amount)
            yield family
        latency = self._histogram("pool_commit_duration_seconds", "Latency of segment commits "
                                  "made by the pool.")
        self._add_histogram(latency, [], LATENCY_BUCKETS, pool.commit_latency,
                            pool.commit_seconds)
        yield latency


def register_metrics(
    registry: CollectorRegistry,
    *,
    store: RequestMetrics | None = None,
    fetcher: Fetcher | None = None,
    pool: PoolMetrics | None = None,
    namespace: str = "tieredstore",
    const_labels: Mapping[str, str] | None = None,
) -> TieredStoreCollector:
    """Build a :class:`TieredStoreCollector` and register it on ``registry``."""
    collector = TieredStoreCollector(store=store, fetcher=fetcher, pool=pool,
                                     namespace=namespace, const_labels=const_labels)
    registry.register(collector)
    return collector
