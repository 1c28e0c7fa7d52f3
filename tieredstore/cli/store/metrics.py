"""tieredstore metrics: a bucket's per-queue figures, read-only: printed once, or
served to Prometheus with ``--listen``.

Of every broker of the cluster (``--broker`` narrows; a pass lists the
cluster's brokers again, so a broker that opens later is found). Per queue
(labels broker, topic and queue) the offsets, live bytes and segments,
merges owed and the store times of the first and last message, as the bucket
holds them, under the names a writer exports; and this process's own
requests, bytes and their cost. The store is opened read-only: nothing is
written, no queue is claimed, a live writer is never fenced. The copy lag
(bytes not yet in the bucket) is only in a writer's own metrics: the bucket
does not record it. Names and what a pass costs: docs/metrics.md.

Without ``--listen``: one pass over the bucket, printed as a table (``--json``:
one document, the values a scrape after that pass serves: ``{"queues":
[{"broker", "topic", "queue", NAME: value, ...}], "metrics": [{"name", "labels",
"value"}]}``, where each NAME of a queue is exported as
``tieredstore_queue_NAME`` with its broker, topic and queue labels, e.g.
``min_offset``, ``max_offset``, ``commit_offset``, ``stored_bytes``,
``segments``, ``merges_pending``, ``oldest_message_timestamp_seconds``,
``newest_message_timestamp_seconds``; ``metrics`` holds every other sample
but the latency histograms (each broker's writer's liveness in
``tieredstore_broker_writer_last_seen_timestamp_seconds``, labels broker,
writer, state); ``tieredstore_corrupt_queues`` counts the queues
the pass could not read and those whose metadata is lost, as ``verify``
reports them and ``repair`` rebuilds them: the text's ``unreadable``).

With ``--listen HOST:PORT``: serves http://HOST:PORT/metrics until
interrupted; ``--listen :PORT`` (or ``PORT``) binds ``metrics_host``
(127.0.0.1 unless configured), the host ``--metrics-port`` binds, not every
interface. A scrape answers from the last pass over the bucket while it is
younger than ``--min-interval``, else makes one first.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

from tieredstore import sync
from tieredstore.config import human_size
from tieredstore.errors import ConfigError
from tieredstore.store import iso, scrape_bucket, serve_bucket_metrics

from ..common import CliError, check_in_cluster, print_json, read_only_cluster, seconds, table

HELP = ("a bucket's per-queue figures, once or served to Prometheus with --listen (read-only, "
        "never fences a writer)")

DEFAULT_INTERVAL = 60.0  # --min-interval's default, in seconds
QUEUE_PREFIX = "tieredstore_queue_"
QUEUE_LABELS = {"broker", "topic", "queue"}


def listen_address(text: str) -> tuple[str | None, int]:
    """An argparse type: ``HOST:PORT`` (``[v6]:PORT`` for IPv6), or ``:PORT`` or
    ``PORT`` alone (host None: ``metrics_host``, as ``--metrics-port`` binds);
    port 0: any free one."""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or int(port) > 65535 or (host.startswith("[")
                                                   and not host.endswith("]")):
        raise argparse.ArgumentTypeError(f"not HOST:PORT, :PORT or PORT with a port in "
                                         f"[0, 65535]: {text!r}")
    return host.removeprefix("[").removesuffix("]") or None, int(port)


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", type=listen_address, default=None, metavar="HOST:PORT",
                        help="serve /metrics on this address until interrupted, e.g. "
                             "127.0.0.1:9464, or :9464 (or 9464) on metrics_host, 127.0.0.1 "
                             "by default, as --metrics-port binds (port 0 picks a free one, "
                             "printed at start); without it, print one pass and exit")
    parser.add_argument("--min-interval", type=seconds(0, 86400), default=None,
                        metavar="DURATION",
                        help="with --listen: a scrape reuses the last pass over the bucket "
                             "while it is younger than this (30s, 5m; a plain number is "
                             "seconds; default 60s; 0: every scrape makes a pass; what a "
                             "pass costs: docs/metrics.md)")


def run(args: argparse.Namespace) -> int:
    if args.listen is None and args.min_interval is not None:
        raise CliError("--min-interval applies to --listen only (without it: one pass)")
    if args.listen is None:
        document = sync.run(one_pass(args))
        if args.json:
            print_json(document)
        else:
            print(render(document))
        return 0
    given, port = args.listen
    interval = DEFAULT_INTERVAL if args.min_interval is None else args.min_interval

    async def main() -> None:
        async with await read_only_cluster(args) as reader:
            if reader.selected is not None:
                await check_in_cluster(reader)  # a broker named that the cluster lacks
            host = reader.config.metrics_host if given is None else given

            def ready(bound: int) -> None:
                shown = f"[{host}]" if ":" in host else host
                print(f"serving metrics on http://{shown}:{bound}/metrics", flush=True)

            try:
                await serve_bucket_metrics(reader, host, port, min_interval=interval,
                                           on_ready=ready)
            except ConfigError as exc:
                if exc.key != "metrics_port":
                    raise
                raise CliError(f"--listen: {exc.detail}") from None

    sync.run(main())
    return 0


async def one_pass(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--json`` document of one pass (the module doc gives its shape)."""
    async with await read_only_cluster(args) as reader:
        if reader.selected is not None:
            await check_in_cluster(reader)  # a broker named that the cluster lacks
        families = await scrape_bucket(reader)
    queues: dict[tuple[str, str, int], dict[str, Any]] = defaultdict(dict)
    others = []
    for family in families:
        if family.type == "histogram":
            continue
        for sample in family.samples:
            value = _number(sample.value)
            if set(sample.labels) == QUEUE_LABELS and sample.name.startswith(QUEUE_PREFIX):
                key = (sample.labels["broker"], sample.labels["topic"],
                       int(sample.labels["queue"]))
                queues[key][sample.name.removeprefix(QUEUE_PREFIX)] = value
            else:
                others.append({"name": sample.name, "labels": dict(sample.labels),
                               "value": value})
    return {"queues": [{"broker": b, "topic": t, "queue": q, **values}
                       for (b, t, q), values in sorted(queues.items())],
            "metrics": others}


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value


def render(document: dict[str, Any]) -> str:
    """The table of a pass's queues, a line on the store and the pass's requests,
    and a line per broker's writer."""
    def at(seconds: float | None) -> str | None:
        return None if seconds is None else iso(int(seconds * 1000))

    rows = [[q["broker"], q["topic"], q["queue"], q.get("min_offset"), q.get("max_offset"),
             q.get("segments"), human_size(int(q.get("stored_bytes", 0)), exact=False),
             q.get("merges_pending"), at(q.get("oldest_message_timestamp_seconds")),
             at(q.get("newest_message_timestamp_seconds"))] for q in document["queues"]]
    totals = {m["name"]: m["value"] for m in document["metrics"] if not m["labels"]}
    requests = {m["labels"]["op"]: m["value"] for m in document["metrics"]
                if m["name"] == "tieredstore_store_requests_total"}
    cost = sum(m["value"] for m in document["metrics"]
               if m["name"] == "tieredstore_store_request_cost_dollars_total")
    shown = ", ".join(f"{op} {n}" for op, n in sorted(requests.items()))
    writers = [f"broker {m['labels']['broker']}: {m['labels']['state']} writer "
               f"{m['labels']['writer']}, last seen {at(m['value'])}"
               for m in document["metrics"]
               if m["name"] == "tieredstore_broker_writer_last_seen_timestamp_seconds"]
    return "\n".join([
        table(rows, ["broker", "topic", "queue", "min", "max", "segments", "bytes",
                     "merges owed", "oldest", "newest"]),
        f"queues {totals.get('tieredstore_queues', 0)}, unreadable "
        f"{totals.get('tieredstore_corrupt_queues', 0)}; the pass made "
        f"{totals.get('tieredstore_bucket_refresh_requests', 0)} requests; this process "
        f"{sum(requests.values())} ({shown or 'none'}), ${cost:.6f}", *writers])
