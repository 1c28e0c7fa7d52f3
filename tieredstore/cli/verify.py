"""``tieredstore verify``: read every message of every queue and check every CRC.

Read-only. Renders :func:`tieredstore.store.verify_store` (what is checked is
said there, in :mod:`tieredstore.store.verify`): one row per queue, the
totals, and the first errors.
"""

from __future__ import annotations

import argparse
import sys

from tieredstore import sync
from tieredstore.config import human_size
from tieredstore.store import VerifyReport, verify_store

from .common import (
    EXIT_FAILED,
    EXIT_OK,
    format_requests,
    open_existing_store,
    progress,
    progress_enabled,
    resolve_config,
    table,
)

HELP = "read every message and check every CRC (read-only); exit 1 on any error"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="only this topic")
    parser.add_argument("--queue", type=int, help="only this queue id")
    parser.add_argument("--max-errors", type=int, default=20, metavar="N",
                        help="errors to print (all are counted; default 20)")


def print_report(report: VerifyReport, *, max_errors: int) -> None:
    rows = [[c.topic, c.queue_id, c.min_offset, c.max_offset, c.segments,
             human_size(c.bytes, exact=False), c.units, c.records,
             "ok" if not c.error_count else f"{c.error_count} ERRORS"]
            for c in report.queues]
    print(table(rows, ["topic", "queue", "min", "max", "segments", "bytes", "units",
                       "messages", "result"]))
    undispatched = sum(c.undispatched for c in report.queues)
    dead = sum(c.dead_bytes for c in report.queues)
    print(f"queues {len(report.queues)}, messages {report.messages}"
          + (f" ({undispatched} not yet dispatched)" if undispatched else "")
          + (f", dead bytes {dead}" if dead else "")
          + f", errors {report.error_count}")
    if report.error_count:
        shown = [e for c in report.queues for e in c.errors][:max_errors]
        print("first errors:", file=sys.stderr)
        for line in shown:
            print(f"  {line}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    config = resolve_config(args)

    async def main() -> VerifyReport:
        async with open_existing_store(config) as store:
            with progress(progress_enabled(args), desc="verify", unit="B") as bar:
                return await verify_store(store, config, topic=args.topic,
                                          queue_id=args.queue, on_bytes=bar.update)

    report = sync.run(main())
    print_report(report, max_errors=args.max_errors)
    print(f"requests: {format_requests(report.requests)}")
    return EXIT_FAILED if report.error_count else EXIT_OK
