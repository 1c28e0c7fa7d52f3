"""``tieredstore gc``: delete what nothing needs, or list it.

One pass of the garbage collection the store also runs in the background
(``gc_interval``), over every broker of the cluster (running or not;
``--broker`` narrows): segments below a queue's first live record (a retention
pass that crashed before its deletes), data chunks and sealed markers beside
a merged object, multipart uploads begun before the safety age (a merge
whose writer died), log objects with nothing live and log fences (never a
log's newest entry), the
offload attempts no managed ledger records with their uploads, and the local
backend's temporary files. Anything younger than ``--safety-age`` (a duration with a unit,
``1h``, as ``gc_safety_age``; default ``gc_safety_age``) is left alone.

Read-only on metadata: it never claims a queue, so it is safe beside a live
writer. ``--dry-run`` lists what a pass would delete and deletes nothing.

``--json``: ``{"dry_run", "deleted" (items deleted), "found": [{"broker", "kind",
"key", "detail"}], "by_kind": {kind: count}}``; ``broker`` is the broker whose
queue or log an item is of (null for a temporary file or an offload attempt).
"""

from __future__ import annotations

import argparse

from tieredstore import sync
from tieredstore.config import YEAR
from tieredstore.ledger import offload_garbage
from tieredstore.store import GcReport, collect_garbage

from ..common import (
    EXIT_OK,
    check_in_cluster,
    cluster_config,
    open_existing_store,
    print_json,
    read_only_cluster,
    seconds,
    table,
)


async def gc(args: argparse.Namespace, *, dry_run: bool, safety_age: float) -> GcReport:
    """The cluster is read through a read-only view; what it finds is deleted
    through the backend under it, the one writer of this command."""
    async with open_existing_store(cluster_config(args)) as store, \
            await read_only_cluster(args, store=store) as cluster:
        if cluster.selected is not None:
            await check_in_cluster(cluster)  # a broker named that the cluster lacks
        config = cluster.config
        return await collect_garbage(store, config, safety_age=safety_age, dry_run=dry_run,
                                     finders=[offload_garbage(config, store)],
                                     brokers=await cluster.brokers())


HELP = "delete what no metadata references (--dry-run: list it)"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="list, delete nothing")
    parser.add_argument("--safety-age", type=seconds(0.0, YEAR, needs_unit=True), default=None,
                        metavar="DURATION", help="leave anything younger alone: a duration "
                        "with a unit (1h, 30m; 0: none), 0 to a year, as gc_safety_age "
                        "(default: gc_safety_age)")


def run(args: argparse.Namespace) -> int:
    config = cluster_config(args)
    age = config.gc_safety_age if args.safety_age is None else args.safety_age
    report = sync.run(gc(args, dry_run=args.dry_run, safety_age=age))
    print_json(as_document(report)) if args.json else print(render(report))
    return EXIT_OK


def as_document(report: GcReport) -> dict[str, object]:
    """The ``--json`` document of a pass."""
    return {"dry_run": report.dry_run, "deleted": report.deleted,
            "found": [{"broker": g.broker, "kind": g.kind, "key": g.key, "detail": g.detail}
                      for g in report.found],
            "by_kind": dict(report.by_kind())}


def render(report: GcReport) -> str:
    """A pass's items as a table, then what went (or, dry, would go) by kind."""
    lines = [table([[g.broker, g.kind, g.key, g.detail] for g in report.found],
                   ["broker", "kind", "key", "detail"])] if report.found else []
    counts = ", ".join(f"{n} {kind}" for kind, n in sorted(report.by_kind().items()))
    if report.dry_run:
        lines.append(f"dry run: {len(report.found)} item(s) would be deleted")
    else:
        lines.append(f"deleted {report.deleted} item(s)")
    return "\n".join(lines) + (f" ({counts})" if counts else "")
