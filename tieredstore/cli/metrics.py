"""tieredstore metrics: a Prometheus exporter for a bucket, read-only.

Serves http://HOST:PORT/metrics until interrupted: per queue (labels topic
and queue) the offsets, live bytes and segments, merges owed and
the store times of the first and last message, as the bucket holds them,
under the names a writer exports; and this process's own requests, bytes and
their cost. The store is opened read-only: nothing is written, no queue is
claimed, a live writer is never fenced. A scrape answers from the last pass
over the bucket while it is younger than --min-interval, else makes one
first (its requests: docs/metrics.md). The copy lag (bytes not yet in the
bucket) is only in a writer's own metrics: the bucket does not record it.
"""

from __future__ import annotations

import argparse

from tieredstore import sync
from tieredstore.errors import ConfigError
from tieredstore.store import serve_bucket_metrics

from .common import CliError, read_only_store, seconds

HELP = "serve a bucket's per-queue figures to Prometheus (read-only, never fences a writer)"

DEFAULT_LISTEN = "127.0.0.1:9464"


def listen_address(text: str) -> tuple[str, int]:
    """An argparse type: ``HOST:PORT`` (``[v6]:PORT`` for IPv6; port 0: any free one)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"not HOST:PORT with a port in [0, 65535]: {text!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", type=listen_address, default=DEFAULT_LISTEN,
                        metavar="HOST:PORT",
                        help=f"address to serve /metrics on (default {DEFAULT_LISTEN}; "
                             "port 0 picks a free one, printed at start)")
    parser.add_argument("--min-interval", type=seconds(0, 86400), default=60.0,
                        metavar="DURATION",
                        help="a scrape reuses the last pass over the bucket while it is "
                             "younger than this (30s, 5m; a plain number is seconds; "
                             "default 60s; 0: every scrape makes a pass; "
                             "what a pass costs: docs/metrics.md)")


def run(args: argparse.Namespace) -> int:
    host, port = args.listen

    def ready(bound: int) -> None:
        print(f"serving metrics on http://{host}:{bound}/metrics", flush=True)

    async def main() -> None:
        async with await read_only_store(args) as reader:
            try:
                await serve_bucket_metrics(reader, host, port, min_interval=args.min_interval,
                                           on_ready=ready)
            except ConfigError as exc:
                if exc.key != "metrics_port":
                    raise
                raise CliError(f"--listen: {exc.detail}") from None

    sync.run(main())
    return 0
