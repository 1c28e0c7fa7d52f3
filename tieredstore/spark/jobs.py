"""Spark jobs over a store: export, verify, compact, stats.

    tieredstore spark [--master M] export  --path DIR --output OUT [--topic T] [--queue-id Q]
    tieredstore spark [--master M] verify  --path DIR [--topic T] [--queue-id Q]
    tieredstore spark [--master M] compact --path DIR [--dry-run]
    tieredstore spark [--master M] stats   --path DIR [--topic T] [--queue-id Q]
    python -m tieredstore.spark.jobs ...      (the same)
    spark-submit ... tieredstore_job.py verify ...   (the line ``tieredstore spark pack`` prints)

Run by ``python``, the master is ``local[*]`` unless ``--master`` says
otherwise, and a local master binds to loopback only; a cluster's master gets
this environment shipped to its workers (:mod:`tieredstore.spark.shipping`).
Run by spark-submit, its master applies. The store is named as for the reader: ``--path`` (local
backend), ``--backend s3 --bucket B [--endpoint URL] [--region R]``,
``--cluster``, ``--broker``, ``--key-prefix``, ``--config TOML`` and
``--option KEY=VALUE`` for any other config key.

- ``export --output OUT`` appends the selected queues' new messages to the
  Parquet table OUT, incrementally and exactly once: each run writes only the
  messages past each queue's last exported offset (up to its end when the run
  began), in Hive layout ``OUT/topic=T/date=YYYY-MM-DD/part-*.parquet`` (the
  reader's columns; ``date``: the UTC day of ``store_timestamp``), and records
  the exported offsets in ``OUT/_commits/``, written before the files move
  into their partitions. A crashed run shows nothing (or, if it crashed after
  its commit, the rest of its files appear at the next run); the next run
  finishes or redoes it. One run at a time (a lock); nothing new: nothing
  written, exit status 0. ``spark.read.parquet(OUT)`` reads the table, pruning
  by topic and date. OUT: a local directory (or ``file://``), the same path on
  every node. See :mod:`tieredstore.spark.export` and docs/format.md,
  "Export tables".
- ``verify`` reads every message of the selected queues, checks every CRC and
  that offsets run on without gaps, and prints one row per queue; the exit
  status is 1 if any queue has a problem.
- ``compact`` merges sealed segments left unmerged, one task per segment, and
  never touches a queue's active segment; exit status 1 if a merge failed.
  ``compact --log [--log-broker B ...]`` instead compacts each broker's backlog
  of log objects into chunks, one task per broker, with the store's own code
  (it takes each broker's store over: run it with the brokers stopped).
- ``stats`` prints one row per queue: messages, offsets, bytes, segments,
  chunk objects, sealed segments not yet merged, the store timestamps of the
  first and last message; exit status 1 if a queue could not be read.

Each job is also a function of a SparkSession: :func:`export`,
:func:`verify`, :func:`compact`, :func:`stats`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.spark.compact import compact_result, compact_segment, survey
from tieredstore.spark.export import ExportResult, export_table
from tieredstore.spark.logs import LOGS_SCHEMA, compact_broker_log
from tieredstore.spark.options import SELECTION_OPTIONS, config_from_options, on_store
from tieredstore.spark.plan import find_queues
from tieredstore.spark.selection import Selection, names, selection_from_options
from tieredstore.spark.session import get_session, session_running
from tieredstore.spark.stats import STATS_SCHEMA, QueueTask, queue_stats
from tieredstore.spark.table import StepHook
from tieredstore.spark.verify import QueueReport, verify_task
from tieredstore.store import ObjectStore, load_log, queue_log_pieces

T = TypeVar("T")

VERIFY_SCHEMA = ("topic string, queue_id int, segments int, messages long, first_offset long, "
                 "next_offset long, ok boolean, problems array<string>")
COMPACT_SCHEMA = ("topic string, queue_id int, file_type string, base_offset long, "
                  "state string, chunks int, merged boolean, parts int, bytes_copied long, "
                  "bytes_reuploaded long, error string")


@dataclass(frozen=True, slots=True)
class Filters:
    """Which messages a job works on. Offsets and times: from inclusive, to exclusive;
    times as ISO 8601 (naive means UTC) or milliseconds since the epoch."""

    topics: tuple[str, ...] = ()
    queue_ids: tuple[int, ...] = ()
    offset_from: int | None = None
    offset_to: int | None = None
    time_from: str | None = None
    time_to: str | None = None

    def selection(self) -> Selection:
        """Topics and queues (what verify and compact select by), as the reader selects."""
        return selection_from_options({k: v for k, v in self.options().items()
                                       if k in ("topic", "queue_id")})

    def options(self) -> dict[str, str]:
        """The reader's selection options for these filters (exact, and they prune
        segments before any data is read)."""
        out: dict[str, str] = {}
        if self.topics:
            out["topic"] = ",".join(self.topics)
        if self.queue_ids:
            out["queue_id"] = ",".join(str(q) for q in self.queue_ids)
        for name in ("offset_from", "offset_to", "time_from", "time_to"):
            value = getattr(self, name)
            if value is not None:
                out[name] = str(value)
        return out


def export(spark: Any, options: dict[str, str], output: str, filters: Filters | None = None,
           *, on_step: StepHook | None = None) -> ExportResult:
    """Append the selected queues' messages not exported yet to the table at
    ``output`` (:func:`tieredstore.spark.export.export_table`); ``on_step``: called
    with each step's name as it completes. Queues are selected by topic and
    queue id only: the offsets are the table's to choose."""
    selected = {**options, **(filters or Filters()).options()}
    ranged = sorted(k for k in selected if k.lower() in SELECTION_OPTIONS
                    and k.lower() not in ("topic", "queue_id"))
    if ranged:
        raise ConfigError(ranged[0], "export selects queues by topic and queue id only: "
                          "each run exports what is past the table's last commit")
    selection = selection_from_options({k.lower(): v for k, v in selected.items()
                                        if k.lower() in ("topic", "queue_id")})
    return export_table(spark, options, output, selection, on_step=on_step)


def _per_queue(spark: Any, options: dict[str, str], filters: Filters | None,
               task: Callable[[TieredStoreConfig, QueueTask], T]) -> list[T]:
    """``task`` for each selected queue, one Spark task each, with the queue's
    pieces of the broker's log, loaded once here."""
    config = config_from_options(options)

    async def queues(store: ObjectStore) -> list[QueueTask]:
        found = await find_queues(store, config, (filters or Filters()).selection())
        log = await load_log(store, config)
        return [QueueTask(t, q, queue_log_pieces(log, t, q)) for t, q in found]

    return _run_tasks(spark, functools.partial(task, config), on_store(config, queues))


def _run_tasks(spark: Any, func: Any, items: Sequence[Any]) -> list[Any]:
    """``func`` over ``items``, one Spark task each."""
    if not items:
        return []
    rdd = spark.sparkContext.parallelize(list(items), numSlices=len(items))
    return list(rdd.map(func).collect())


def verify_reports(spark: Any, options: dict[str, str], filters: Filters | None = None
                   ) -> list[QueueReport]:
    """Verify the selected queues (:func:`tieredstore.store.verify_queue`): one
    task and one report per queue."""
    reports = _per_queue(spark, options, filters, verify_task)
    return sorted((r for r in reports if r is not None), key=lambda r: (r.topic, r.queue_id))


def verify(spark: Any, options: dict[str, str], filters: Filters | None = None) -> Any:
    """:func:`verify_reports` as a DataFrame (``VERIFY_SCHEMA``)."""
    rows = [dataclasses.astuple(r) for r in verify_reports(spark, options, filters)]
    return spark.createDataFrame([(*r[:-1], list(r[-1])) for r in rows], VERIFY_SCHEMA)


def compact(spark: Any, options: dict[str, str], filters: Filters | None = None, *,
            dry_run: bool = False) -> tuple[Any, list[str]]:
    """Merge sealed segments left unmerged: a DataFrame of what each task did
    (``COMPACT_SCHEMA``) and the segments left alone on purpose, with why."""
    config = config_from_options(options)
    found = on_store(config, lambda store: survey(store, config,
                                                  (filters or Filters()).selection()))
    if dry_run:
        results = [compact_result(t, merged=False, error="dry run") for t in found.targets]
    else:
        results = _run_tasks(spark, functools.partial(compact_segment, config), found.targets)
    rows = [dataclasses.astuple(r) for r in results]
    return spark.createDataFrame(rows, COMPACT_SCHEMA), found.skipped


def compact_logs(spark: Any, options: dict[str, str], brokers: Sequence[str] = ()) -> Any:
    """Compact the log backlog of each broker (default: the configured one), one task
    per broker, with the store's own code (:mod:`tieredstore.spark.logs`; it takes
    each broker's store over: run it with the brokers stopped). A DataFrame of
    ``LOGS_SCHEMA``."""
    config = config_from_options(options)
    names = list(dict.fromkeys(brokers)) or [config.broker]
    rows = _run_tasks(spark, functools.partial(compact_broker_log, config), names)
    return spark.createDataFrame([dataclasses.astuple(r) for r in rows], LOGS_SCHEMA)


def stats(spark: Any, options: dict[str, str], filters: Filters | None = None) -> Any:
    """One row per selected queue (``STATS_SCHEMA``), one task per queue. Offset and
    time filters do not apply: a queue is summed up whole."""
    return spark.createDataFrame(_per_queue(spark, options, filters, queue_stats), STATS_SCHEMA)


# --- command line ------------------------------------------------------------------

# The store arguments: each is the reader option of its name (help: None, none).
STORE_ARGS = {"config": "a tieredstore TOML file", "path": "the local backend's directory",
              "backend": None, "bucket": None, "endpoint": None, "region": None,
              "cluster": None, "broker": None, "key_prefix": None}

def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog,
                                     description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, or local[*])")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("export", "append new messages to a Parquet table, exactly once"),
                       ("verify", "check every CRC and offset; one row per queue"),
                       ("compact", "merge sealed segments left unmerged"),
                       ("stats", "messages, bytes, segments, chunks, times; one row per queue")):
        sub = commands.add_parser(name, help=text)
        store = sub.add_argument_group("store")
        for option, about in STORE_ARGS.items():
            store.add_argument(f"--{option.replace('_', '-')}", dest=option, help=about)
        store.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                           help="any other config key (repeatable)")
        which = sub.add_argument_group("selection")
        which.add_argument("--topic", action="append", default=[],
                           help="topic (repeatable, or comma-separated)")
        which.add_argument("--queue-id", action="append", default=[], dest="queue_id",
                           help="queue id (repeatable, or comma-separated)")
        if name == "export":
            sub.description = (
                "Append the selected queues' messages past their last exported offsets to "
                "the Parquet table OUT (OUT/topic=T/date=YYYY-MM-DD/*.parquet, date in UTC), "
                "exactly once: the exported offsets are committed in OUT/_commits before the "
                "files move into their partitions, a crashed run is finished or redone by the "
                "next, and one run at a time may work on OUT. Nothing new: nothing written, "
                "exit status 0. Read the table with spark.read.parquet(OUT).")
            sub.add_argument("--output", required=True, metavar="OUT",
                             help="the table: a local directory or file:// URI (on a "
                                  "cluster, the same path on every node)")
        if name == "compact":
            sub.add_argument("--dry-run", action="store_true",
                             help="list what would be merged, merge nothing")
            sub.add_argument("--log", action="store_true",
                             help="compact the brokers' log backlogs into chunks instead, one "
                                  "task per broker (takes each broker's store over: run it "
                                  "with the brokers stopped)")
            sub.add_argument("--log-broker", action="append", default=[], dest="log_brokers",
                             metavar="BROKER", help="with --log: a broker (repeatable, or "
                             "comma-separated; default: --broker or the configured one)")
    return parser


def _split(values: Sequence[str]) -> list[str]:
    return [name for v in values for name in names(v)]


def store_options(args: argparse.Namespace) -> dict[str, str]:
    """The reader options the store arguments name."""
    options = {k: getattr(args, k) for k in STORE_ARGS if getattr(args, k) is not None}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--option {item!r}: expected KEY=VALUE")
        options[key.strip()] = value
    return options


def filters_of(args: argparse.Namespace) -> Filters:
    try:
        queue_ids = tuple(int(q) for q in _split(args.queue_id))
    except ValueError:
        raise SystemExit(f"--queue-id: integers expected, got {args.queue_id}") from None
    return Filters(tuple(_split(args.topic)), queue_ids,
                   getattr(args, "offset_from", None), getattr(args, "offset_to", None),
                   getattr(args, "time_from", None), getattr(args, "time_to", None))


def main(argv: Sequence[str] | None = None, *, spark: Any = None,
         prog: str = "python -m tieredstore.spark.jobs") -> int:
    """Run a job; the exit status. Given a ``spark`` session, use it and leave it
    running; a session that was running already is left running too."""
    args = _parser(prog).parse_args(argv)
    options, filters = store_options(args), filters_of(args)
    own = spark is None and not session_running()
    if spark is None:
        spark = get_session(args.master, app_name=f"tieredstore-{args.command}")
    try:
        if args.command == "export":
            _print_export(export(spark, options, args.output, filters))
            return 0
        if args.command == "verify":
            reports = verify_reports(spark, options, filters)
            _print_verify(reports)
            return 0 if all(r.ok for r in reports) else 1
        if args.command == "stats":
            return _print_stats(stats(spark, options, filters).collect())
        if args.log:
            return _print_logs(compact_logs(spark, options, _split(args.log_brokers)).collect())
        df, skipped = compact(spark, options, filters, dry_run=args.dry_run)
        results = df.collect()
        for row in results:
            status = "merged" if row.merged else f"NOT merged: {row.error}"
            print(f"{row.topic}/{row.queue_id} {row.file_type} @{row.base_offset} "
                  f"({row.state}, {row.chunks} chunks): {status}")
        for line in skipped:
            print(f"skipped {line}")
        print(f"{sum(1 for r in results if r.merged)} of {len(results)} segments merged")
        return 0 if args.dry_run or all(r.merged for r in results) else 1
    finally:
        if own:
            spark.stop()


def _print_export(result: ExportResult) -> None:
    for topic, queue_id, lost, first in result.trimmed:
        print(f"{topic}/{queue_id}: offsets {lost}..{first - 1} were removed by retention "
              "before they were exported")
    if result.sequence is None:
        print(f"nothing new to export to {result.table}")
        return
    print(f"exported {result.rows} messages of {len(result.ranges)} queue(s) to "
          f"{result.table} (commit {result.sequence})")


def _print_verify(reports: Sequence[QueueReport]) -> None:
    print(f"{'queue':<30} {'segments':>8} {'messages':>10} {'offsets':>20}  verdict")
    for r in reports:
        offsets = f"{r.first_offset}..{r.next_offset}"
        verdict = "ok" if r.ok else f"{len(r.problems)} problem(s)"
        print(f"{r.topic + '/' + str(r.queue_id):<30} {r.segments:>8} {r.messages:>10} "
              f"{offsets:>20}  {verdict}")
    for r in reports:
        for problem in r.problems:
            print(f"  {problem}")
    bad = sum(1 for r in reports if not r.ok)
    print(f"{len(reports)} queue(s) verified, {bad} with problems")


def _print_logs(rows: Sequence[Any]) -> int:
    for r in rows:
        if r.error is not None:
            print(f"{r.broker}: NOT compacted: {r.error}")
            continue
        print(f"{r.broker}: {r.queues} queue(s); log objects {r.log_objects_before} -> "
              f"{r.log_objects_after} ({r.log_bytes_before} -> {r.log_bytes_after} bytes) "
              f"in {r.seconds:.1f} s")
    return 1 if any(r.error is not None for r in rows) else 0


def _print_stats(rows: Sequence[Any]) -> int:
    print(f"{'queue':<30} {'messages':>10} {'offsets':>20} {'cl bytes':>12} {'segments':>8} "
          f"{'chunks':>7} {'unmerged':>8}  oldest .. newest")
    for r in rows:
        name = f"{r.topic}/{r.queue_id}"
        if r.error is not None:
            print(f"{name:<30} {r.error}")
            continue
        times = f"{r.oldest:%Y-%m-%d %H:%M:%S} .. {r.newest:%Y-%m-%d %H:%M:%S}" \
            if r.oldest is not None else "-"
        print(f"{name:<30} {r.messages:>10} {f'{r.min_offset}..{r.max_offset}':>20} "
              f"{r.commitlog_bytes:>12} {r.segments:>8} {r.chunks:>7} "
              f"{r.unmerged_segments:>8}  {times}")
    bad = sum(1 for r in rows if r.error is not None)
    print(f"{len(rows)} queue(s), {sum(r.messages or 0 for r in rows)} messages"
          + (f", {bad} unreadable" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
