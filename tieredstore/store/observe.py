"""The store's optional Prometheus endpoint.

The store's collector is :class:`~tieredstore.metrics.TieredStoreCollector`
over its sources and its queues' figures (``metrics_collector``).
:class:`MetricsServer` serves a collector over HTTP (``prometheus_client``'s
server, on a registry of its own), bound to ``metrics_host``
(127.0.0.1 by default) at ``metrics_port``; the store starts one at open when
``metrics_port`` is set and stops it at close.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.registry import Collector, CollectorRegistry

from tieredstore.errors import ConfigError


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
