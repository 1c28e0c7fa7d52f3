"""What a host serves to its Prometheus: the store's collector, and an optional endpoint.

:class:`StoreCollector` exports the library's counters (object-store requests
and bytes, the fetcher, the upload pool:
:class:`~tieredstore.metrics.TieredStoreCollector`) together with figures of
the store itself: per queue (labels ``topic`` and ``queue``) its min, max and
commit offsets, the bytes appended and not yet in the bucket and the merges
owed; how many queues are open and corrupt; and the requests' estimated cost
in dollars at the configured prices (``price_per_1000_put``: PUT, COPY, POST
and LIST requests; ``price_per_1000_get``: GET and HEAD; DELETE is free).
Each scrape reads the figures as they are then, from the scraping thread:
plain values only, nothing awaited.

:class:`MetricsServer` serves a collector over HTTP (``prometheus_client``'s
server, on a registry of its own), bound to ``metrics_host``
(127.0.0.1 by default) at ``metrics_port``; the store starts one at open when
``metrics_port`` is set and stops it at close.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from tieredstore.errors import ConfigError
from tieredstore.metrics import TieredStoreCollector

PUT_CLASS = frozenset({"put", "create_multipart", "upload_part", "upload_part_copy",
                       "complete_multipart", "list", "list_uploads"})
GET_CLASS = frozenset({"get", "head"})


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """One open queue, as the store sees it now."""

    topic: str
    queue_id: int
    min_offset: int
    max_offset: int  # the next offset to be appended
    commit_offset: int  # offsets below it are durable in the bucket
    unflushed_bytes: int  # appended (commit log and consume queue), not yet in the bucket
    merges_pending: int  # sealed segments whose merge is owed


@dataclass(frozen=True, slots=True)
class Prices:
    """Dollars per 1,000 requests of each class (S3 Standard's list prices by default)."""

    put: float = 0.005
    get: float = 0.0004


class StoreCollector(TieredStoreCollector):
    """The library's counters (``sources``: :class:`TieredStoreCollector`'s
    arguments) and the store's own figures (see the module)."""

    def __init__(self, queues: Callable[[], Sequence[QueueFigures]], corrupt: Callable[[], int],
                 prices: Prices, **sources: Any) -> None:
        super().__init__(**sources)
        self.queues = queues
        self.corrupt = corrupt
        self.prices = prices

    def collect(self) -> Iterator[Metric]:
        yield from super().collect()
        figures = list(self.queues())
        for field, doc in (
            ("min_offset", "The queue's first live offset."),
            ("max_offset", "The offset the queue's next append gets."),
            ("commit_offset", "Offsets below it are durable in the bucket."),
            ("unflushed_bytes", "Bytes appended to the queue and not yet in the bucket."),
            ("merges_pending", "Sealed segments of the queue whose merge is owed."),
        ):
            gauge = GaugeMetricFamily(self._name(f"queue_{field}"), doc,
                                      labels=self._labels("topic", "queue"))
            for q in figures:
                gauge.add_metric(self._values(q.topic, str(q.queue_id)), getattr(q, field))
            yield gauge
        for metric, doc, value in (("queues", "Queues open in the store.", len(figures)),
                                   ("corrupt_queues", "Queues whose damage stops appends.",
                                    self.corrupt())):
            gauge = GaugeMetricFamily(self._name(metric), doc, labels=self._labels())
            gauge.add_metric(self._values(), value)
            yield gauge
        cost = self._counter("store_request_cost_dollars", "Estimated cost of the object-store "
                             "requests made, at the configured prices.", "class")
        requests = {} if self.store is None else self.store.snapshot()["requests"]
        for cls, ops, price in (("put", PUT_CLASS, self.prices.put),
                                ("get", GET_CLASS, self.prices.get)):
            count = sum(requests.get(op, 0) for op in ops)
            cost.add_metric(self._values(cls), count * price / 1000)
        yield cost


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
