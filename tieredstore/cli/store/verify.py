"""``tieredstore verify``: read every message of every queue and check every CRC.

Read-only. Renders :func:`tieredstore.store.verify_store` (what is checked is
said there, in :mod:`tieredstore.store.ops.verify`) over every broker of the
cluster (``--broker`` narrows): one row per queue, the totals, and the first
errors (each named by its broker). Besides what each queue's check reads:
one paged LIST of the cluster's metadata root (none with ``--broker``), per
broker a LIST of its heads and a load of its log, and one paged LIST of every
key of the store for all brokers (the segments no metadata references).
``--topic`` or ``--queue`` naming nothing on those brokers is an error (exit
2; it names the brokers that have it, if others do); exit 1 if any error was
found.

The report's rendering here (:func:`print_report`, and ``--json``) is
``tieredstore spark verify``'s too. ``--json``: ``{"queues": [{"broker",
"topic", "queue", "min_offset", "max_offset" (offsets [min, max): max is the
consume queue's next offset, exclusive), "segments", "messages",
"undispatched" (commit-log records after max_offset, checked too; counted in
messages), "dead_bytes", "units", "checked_bytes", "error_count", "errors":
[...first ones]}], "messages", "error_count", "requests": {operation:
count}}`` (:meth:`tieredstore.store.VerifyReport.document`). ``segments``
counts the commit log's, the consume queue's and the key index's live
segments (as ``inspect queues`` does); ``units`` and ``checked_bytes`` are
what was fetched and CRC-checked: the commit log and the consume queue only
(the key index is not read). A queue's live bytes in the bucket are
``stored_bytes`` in ``tieredstore metrics``.
"""

from __future__ import annotations

import argparse
import sys

from tieredstore import sync
from tieredstore.config import human_size
from tieredstore.store import VerifyReport, verify_store

from ..common import (
    EXIT_FAILED,
    EXIT_OK,
    add_metrics_port,
    check_in_cluster,
    format_requests,
    nonnegative_int,
    print_json,
    progress,
    progress_enabled,
    read_only_cluster,
    table,
)

HELP = "read every message and check every CRC (read-only); exit 1 on any error"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    add_metrics_port(parser, "the requests, bytes and cost of the verify run")
    parser.add_argument("--topic", help="only this topic")
    parser.add_argument("--queue", type=nonnegative_int, metavar="ID", help="only this queue id")
    add_max_errors(parser)


def add_max_errors(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-errors", type=nonnegative_int, default=20, metavar="N",
                        help="errors to print (all are counted; default 20)")


def print_report(report: VerifyReport, *, max_errors: int) -> None:
    """The report as a table, the totals, the requests, and the first
    ``max_errors`` errors (on stderr)."""
    rows = [[c.broker, c.topic, c.queue_id, c.min_offset, c.max_offset, c.segments,
             human_size(c.bytes, exact=False), c.units, c.records,
             "ok" if not c.error_count else f"{c.error_count} ERRORS"]
            for c in report.queues]
    print(table(rows, ["broker", "topic", "queue", "min", "max", "segments", "checked",
                       "units", "messages", "result"]))
    undispatched = sum(c.undispatched for c in report.queues)
    dead = sum(c.dead_bytes for c in report.queues)
    print(f"queues {len(report.queues)}, messages {report.messages}"
          + (f" ({undispatched} not yet dispatched)" if undispatched else "")
          + (f", dead bytes {dead}" if dead else "")
          + f", errors {report.error_count}")
    print(f"requests: {format_requests(report.requests)}")
    if report.error_count:
        shown = [f"{c.broker} {e}" for c in report.queues for e in c.errors][:max_errors]
        print("first errors:", file=sys.stderr)
        for line in shown:
            print(f"  {line}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    async def main() -> VerifyReport:
        async with await read_only_cluster(args) as cluster:
            brokers = await cluster.brokers()
            with progress(progress_enabled(args), desc="verify", unit="B") as bar:
                report = await verify_store(cluster.store, cluster.config, topic=args.topic,
                                            queue_id=args.queue, on_bytes=bar.update,
                                            brokers=brokers)
            if not report.queues and (args.topic is not None or args.queue is not None
                                      or cluster.selected is not None):
                await check_in_cluster(cluster, args.topic, args.queue)
            return report

    report = sync.run(main())
    if args.json:
        print_json(report.document())
        return EXIT_FAILED if report.error_count else EXIT_OK
    print_report(report, max_errors=args.max_errors)
    return EXIT_FAILED if report.error_count else EXIT_OK
