"""``tieredstore spark export|verify|compact|stats``: the Spark jobs
(:mod:`tieredstore.spark.jobs`); ``tieredstore spark pack``: the environment for a
cluster's workers, and the spark-submit line.

``--master M`` (before or after the job's name; default ``local[*]`` on
loopback, or spark-submit's), then the job and its options; the store is
named with the options every command takes (``--data-dir DIR``, or
``--bucket B --endpoint URL ...``, ``--config TOML``), and ``--option
KEY=VALUE`` for any other config key (an unknown one is an error naming the
closest known option, before Spark starts). ``--topic`` and ``--queue`` select
(repeatable, or comma-separated); one that names nothing in the store is an
error (exit 2) before Spark starts. A master that is not ``local`` gets this
environment shipped to its workers (:mod:`tieredstore.spark.shipping`), which
need only Python and Spark. ``pack [--cache-dir DIR]`` builds that pack
(cached) and prints the ``spark-submit`` line that runs these jobs (or your
own script) with it. Needs the ``spark`` extra (``pip install
'tieredstore[spark]'``). Exit status 1 if a job found a problem.

``--broker`` narrows the jobs to those brokers (``a`` or ``a,b``; default:
every broker of the cluster; ``compact`` works on one broker, the one named
or configured).

``verify`` renders its report as ``tieredstore verify`` does, the same table
and ``--json`` (:mod:`tieredstore.cli.store.verify`; its requests are the tasks').
``--json`` documents: ``stats``: ``{"queues":
[{"broker", "topic", "queue", "messages", "min_offset", "max_offset", "commitlog_bytes",
"consumequeue_bytes", "index_bytes", "segments", "chunks",
"unmerged_segments", "oldest", "newest" (ISO 8601), "error"}]}``; ``export``:
``{"table", "rows", "sequence" (the Delta version; null: nothing new), "exported": [{"broker",
"topic", "queue", "first_offset", "end_offset"}], "trimmed": [the same, removed by
retention before export]}``; ``export --continuous``: one line per micro-batch
``{"table", "batch", "rows", "queues", "version" (null: nothing committed),
"replayed" (committed before: a replay after a restart)}``; ``compact``:
``{"segments": [{"topic", "queue",
"file_type", "base_offset", "state", "chunks", "merged", "parts",
"bytes_copied", "bytes_reuploaded", "error"}], "skipped": [...], "merged"}``;
``compact --log``: ``{"brokers": [{"broker", "log_objects_before",
"log_objects_after", "log_bytes_before", "log_bytes_after", "queues",
"seconds", "error"}]}``; ``pack``: ``{"archive", "bytes", "python",
"submit_line"}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from tieredstore import sync
from tieredstore.errors import ConfigError
from tieredstore.sizes import MiB
from tieredstore.store import VerifyReport, refuse_live_writer

from ..common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_take_over,
    check_in_cluster,
    config_path,
    describe_error,
    existing,
    location_overrides,
    offsets,
    open_existing_store,
    print_json,
    read_only_cluster,
    resolve_config,
    size,
    spark_extra,
)
from ..store.verify import add_max_errors, print_report
from .table import add_output_access, output_settings

JOBS = {"export": "append new messages to a Delta Lake table, exactly once",
        "verify": "check every CRC and offset; one row per queue",
        "compact": "merge sealed segments left unmerged",
        "stats": "messages, bytes, segments, chunks, times; one row per queue"}
PACK = "pack"
MASTER_PLACEHOLDER = "spark://HOST:7077"
EXPORT_ABOUT = (
    "Append the selected queues' messages past their exported end offsets to the "
    "Delta Lake table OUT (partitioned by topic and date, the UTC day), exactly once: "
    "the rows and each queue's new end offset are one Delta commit (delta-rs); a run "
    "killed before it shows nothing and the next run exports its messages; of two runs "
    "at once on the same queues, one commits and the other fails. Nothing new: nothing "
    "written, exit status 0. --continuous: a streaming query instead, a micro-batch every "
    "--trigger, each committed once (a batch replayed after a crash does nothing). Read "
    "the table with any Delta reader (deltalake, Polars read_delta, DuckDB, Spark with "
    "delta-spark).")

# Reader options the jobs take from their flags (--topic, --queue), not --option.
SELECTED_BY_FLAGS = ("topic", "queue_id")

HELP = f"run a Spark job: {', '.join(JOBS)} (--master M); or {PACK} for a cluster"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", default=None,
                        help="Spark master (default: spark-submit's, or local[*])")
    jobs = parser.add_subparsers(dest="job", required=True, metavar="JOB")
    for name, text in JOBS.items():
        job = jobs.add_parser(name, parents=[common], help=text,
                              description=EXPORT_ABOUT if name == "export" else text)
        job.add_argument("--master", default=argparse.SUPPRESS,
                         help="Spark master (default: spark-submit's, or local[*])")
        job.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                         help="any other config key (repeatable)")
        job.add_argument("--topic", action="append", default=[],
                         help="only this topic (repeatable, or comma-separated)")
        job.add_argument("--queue", action="append", default=[], metavar="ID",
                         help="only this queue id (repeatable, or comma-separated)")
        if name == "export":
            job.add_argument("--output", required=True, metavar="OUT",
                             help="the table: a local directory (on a cluster, the same "
                                  "path on every node), file:// URI or s3://bucket/path "
                                  "(with the store's S3 credentials and endpoint, or the "
                                  "--output-* flags')")
            add_output_access(job)
            job.add_argument("--target-file-size", type=size(1024), default=128 * MiB,
                             metavar="SIZE", help="data files of about SIZE at most (512MiB, "
                             "1GiB ...; default 128MiB; `tieredstore table optimize` "
                             "compacts small ones)")
            add_continuous(job)
        if name == "verify":
            add_max_errors(job)
        if name == "compact":
            job.add_argument("--dry-run", action="store_true",
                             help="list what would be merged, merge nothing")
            job.add_argument("--log", action="store_true",
                             help="compact the brokers' log backlogs into chunks instead, one "
                                  "task per broker (takes each broker's store over: run it "
                                  "with the brokers stopped)")
            job.add_argument("--log-broker", action="append", default=[], dest="log_brokers",
                             metavar="BROKER", help="with --log: a broker (repeatable, or "
                             "comma-separated; default: --broker or the configured one)")
            add_take_over(job, "each broker")
    pack = jobs.add_parser(PACK, parents=[common], help="pack tieredstore for a cluster's "
                           "workers; print the spark-submit line that ships it",
                           description="pack tieredstore and its dependencies for a "
                           "cluster's workers; print the spark-submit line that ships it")
    pack.add_argument("--master", default=argparse.SUPPRESS,
                      help=f"the master to put in the line (default {MASTER_PLACEHOLDER})")
    pack.add_argument("--cache-dir", help="where packs are kept (default "
                      "$XDG_CACHE_HOME/tieredstore/spark or ~/.cache/tieredstore/spark)")


def add_continuous(job: argparse.ArgumentParser) -> None:
    """``export``'s streaming options."""
    job.add_argument("--continuous", action="store_true",
                     help="run a streaming query that exports each micro-batch as it "
                          "comes, exactly once, until stopped (Ctrl-C)")
    job.add_argument("--checkpoint", metavar="DIR",
                     help="with --continuous: the query's checkpoint (default "
                          "OUT/_tieredstore_checkpoint; an s3:// table needs one)")
    job.add_argument("--trigger", metavar="INTERVAL",
                     help="with --continuous: a micro-batch every INTERVAL (30s, 1m, 1h, "
                          "500ms, '2 minutes'; default 1m)")
    job.add_argument("--available-now", action="store_true",
                     help="with --continuous: export what is there now in micro-batches, "
                          "then stop (keeps the checkpoint)")
    job.add_argument("--max-messages-per-batch", type=int, default=0, metavar="N",
                     help="with --continuous: at most N messages a micro-batch "
                          "(maxOffsetsPerTrigger; default: no limit)")


def check_continuous(args: argparse.Namespace) -> None:
    """``export``'s streaming options make sense together, else :class:`CliError`."""
    streaming = [flag for flag, given in (
        ("--checkpoint", args.checkpoint is not None), ("--trigger", args.trigger is not None),
        ("--available-now", args.available_now),
        ("--max-messages-per-batch", args.max_messages_per_batch != 0)) if given]
    if streaming and not args.continuous:
        raise CliError(f"{streaming[0]} goes with --continuous")
    if args.trigger is not None and args.available_now:
        raise CliError("--trigger and --available-now: choose one")
    if args.max_messages_per_batch < 0:
        raise CliError("--max-messages-per-batch: at least 1, got "
                       f"{args.max_messages_per_batch}")


def split(values: Sequence[str]) -> list[str]:
    """Repeated, comma-separated values, stripped, empty ones left out."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def queue_ids(values: Sequence[str]) -> list[int]:
    try:
        found = [int(q) for q in split(values)]
    except ValueError:
        raise CliError(f"--queue: queue ids are integers, got {', '.join(values)}") from None
    if any(q < 0 for q in found):
        raise CliError(f"--queue: queue ids are at least 0, got {', '.join(values)}")
    return found


def store_options(args: argparse.Namespace) -> dict[str, str]:
    """The reader options (config keys) that the common store flags and ``--option``
    name, as :func:`tieredstore.cli.common.resolve_config` reads them."""
    options = {key: str(value).lower() if isinstance(value, bool) else str(value)
               for key, value in location_overrides(args).items()}
    path = config_path(args)
    if path is not None:
        options["config"] = path
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--option {item!r}: expected KEY=VALUE")
        if key.strip().lower() in SELECTED_BY_FLAGS:
            raise CliError(f"--option {item!r}: the jobs select with --topic and --queue")
        options[key.strip()] = value
    return options


async def check_selection(args: argparse.Namespace, topics: Sequence[str],
                          queues: Sequence[int]) -> None:
    """Every broker (``--broker``), topic and queue named is in the cluster (on the
    brokers selected), else :class:`~tieredstore.cli.common.UnknownQueue`."""
    async with await read_only_cluster(args) as cluster:
        await check_in_cluster(cluster)
        for topic in topics:
            await check_in_cluster(cluster, topic)
        for queue in queues:
            await check_in_cluster(cluster, topics[0] if len(topics) == 1 else None, queue)


async def refuse_live_brokers(args: argparse.Namespace, brokers: Sequence[str]) -> None:
    """:class:`WriterLive` if a broker that compact works on (``brokers``, else the
    configured one) is written by a live store: its merges and claims are that
    store's business (``--take-over`` goes on anyway)."""
    config = existing(resolve_config(args, disk_cache_bytes=0))
    async with open_existing_store(config) as store:
        for broker in brokers or [config.broker]:
            await refuse_live_writer(store, config.replace(broker=broker))


def run(args: argparse.Namespace) -> int:
    if args.job == PACK:
        return run_pack(args)
    jobs = spark_extra(f"tieredstore spark {args.job}")
    if jobs is None:
        return EXIT_USAGE
    options = store_options(args)
    jobs.check_options(options)  # a mistyped --option: before Spark starts
    table: dict[str, str] | None = None
    if args.job == "export":
        check_continuous(args)
        table = output_settings(args)  # a bad --output-config: before Spark starts
        if args.trigger is not None:
            try:
                jobs.processing_time(args.trigger)  # before Spark starts
            except ConfigError as exc:
                raise CliError(f"--trigger: {exc.detail}") from None
    topics, queues = split(args.topic), queue_ids(args.queue)
    if topics or queues or args.broker is not None:
        sync.run(check_selection(args, topics, queues))
    filters = jobs.Filters(tuple(topics), tuple(queues))
    if args.job == "compact" and not args.dry_run and not args.take_over:
        sync.run(refuse_live_brokers(args, split(args.log_brokers) if args.log else []))
    own = not jobs.session_running()
    spark = jobs.get_session(args.master, app_name=f"tieredstore-{args.job}")
    try:
        if args.job == "export" and args.continuous:
            return run_continuous(args, jobs, spark, options, filters, table=table)
        if args.job == "export":
            return show_export(args, jobs.export(spark, options, args.output, filters,
                                                 target_file_size=args.target_file_size,
                                                 table_settings=table))
        if args.job == "verify":
            return show_verify(args, jobs.verify_reports(spark, options, filters))
        if args.job == "stats":
            return show_stats(args, jobs.stats(spark, options, filters).collect())
        if args.log:
            return show_logs(args, jobs.compact_logs(spark, options,
                                                     split(args.log_brokers)).collect())
        df, skipped = jobs.compact(spark, options, filters, dry_run=args.dry_run)
        return show_compact(args, df.collect(), skipped)
    finally:
        if own:
            spark.stop()


def run_continuous(args: argparse.Namespace, jobs: Any, spark: Any, options: dict[str, str],
                   filters: Any, *, table: dict[str, str] | None) -> int:
    """Run the continuous export until it ends (``--available-now``), fails, or is
    interrupted; a line (``--json``: a JSON object) per micro-batch. ``table``:
    the ``--output-*`` settings of the table."""
    def report(result: Any) -> None:
        if args.json:
            print(json.dumps({"table": result.table, "batch": result.batch,
                              "rows": result.rows, "queues": result.queues,
                              "version": result.version, "replayed": result.replayed}),
                  flush=True)
        elif result.replayed:
            print(f"batch {result.batch}: committed before, nothing to do", flush=True)
        elif result.version is not None:
            print(f"batch {result.batch}: exported {result.rows} messages of "
                  f"{result.queues} queue(s) to {result.table} (commit {result.version})",
                  flush=True)

    query = jobs.export_continuous(spark, options, args.output, filters,
                                   checkpoint=args.checkpoint, trigger=args.trigger,
                                   available_now=args.available_now,
                                   max_messages=args.max_messages_per_batch, report=report,
                                   target_file_size=args.target_file_size,
                                   table_settings=table)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return EXIT_OK


def run_pack(args: argparse.Namespace) -> int:
    """Build (or find) the pack; print the spark-submit line on stdout, the
    archive and its size on stderr."""
    jobs = spark_extra(f"tieredstore spark {PACK}")
    if jobs is None:
        return EXIT_USAGE
    master = args.master or MASTER_PLACEHOLDER
    try:
        built = jobs.pack(args.cache_dir)
    except (jobs.PackError, OSError) as exc:
        print(f"tieredstore spark {PACK}: {describe_error(exc)}", file=sys.stderr)
        return EXIT_USAGE
    size = built.archive.stat().st_size
    if args.json:
        print_json({"archive": str(built.archive), "bytes": size, "python": built.python,
                    "submit_line": built.submit_line(master)})
        return EXIT_OK
    print(f"{built.archive} ({size / 2**20:.0f} MiB); the workers run {built.python} "
          "from their PATH. Append a job and its options (stats --data-dir DIR ...), or put "
          "your own script in place of the last word:", file=sys.stderr)
    print(built.submit_line(master))
    return EXIT_OK


# --- rendering ------------------------------------------------------------------------


def _ranges(ranges: Sequence[tuple[str, str, int, int, int]]) -> list[dict[str, Any]]:
    return [{"broker": b, "topic": t, "queue": q, "first_offset": lo, "end_offset": hi}
            for b, t, q, lo, hi in ranges]


def show_export(args: argparse.Namespace, result: Any) -> int:
    if args.json:
        print_json({"table": result.table, "rows": result.rows, "sequence": result.sequence,
                    "exported": _ranges(result.ranges), "trimmed": _ranges(result.trimmed)})
        return EXIT_OK
    for broker, topic, queue_id, lost, first in result.trimmed:
        print(f"{broker}/{topic}/{queue_id}: offsets {offsets(lost, first)} were removed by "
              "retention before they were exported")
    if result.sequence is None:
        print(f"nothing new to export to {result.table}")
        return EXIT_OK
    print(f"exported {result.rows} messages of {len(result.ranges)} queue(s) to "
          f"{result.table} (commit {result.sequence})")
    return EXIT_OK


def show_verify(args: argparse.Namespace, report: VerifyReport) -> int:
    if args.json:
        print_json(report.document())
    else:
        print_report(report, max_errors=args.max_errors)
    return EXIT_FAILED if report.error_count else EXIT_OK


def _row(row: Any) -> dict[str, Any]:
    """A Spark row as a JSON object: ``queue_id`` as ``queue``, times in ISO 8601."""
    out = {("queue" if k == "queue_id" else k): v for k, v in row.asDict().items()}
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in out.items()}


def show_stats(args: argparse.Namespace, rows: Sequence[Any]) -> int:
    bad = sum(1 for r in rows if r.error is not None)
    if args.json:
        print_json({"queues": [_row(r) for r in rows]})
        return EXIT_FAILED if bad else EXIT_OK
    print(f"{'queue':<40} {'messages':>10} {'offsets':>20} {'cl bytes':>12} {'segments':>8} "
          f"{'chunks':>7} {'unmerged':>8}  oldest .. newest")
    for r in rows:
        name = f"{r.broker}/{r.topic}/{r.queue_id}"
        if r.error is not None:
            print(f"{name:<40} {r.error}")
            continue
        times = f"{r.oldest:%Y-%m-%d %H:%M:%S} .. {r.newest:%Y-%m-%d %H:%M:%S}" \
            if r.oldest is not None else "-"
        print(f"{name:<40} {r.messages:>10} {offsets(r.min_offset, r.max_offset):>20} "
              f"{r.commitlog_bytes:>12} {r.segments:>8} {r.chunks:>7} "
              f"{r.unmerged_segments:>8}  {times}")
    print(f"{len(rows)} queue(s), {sum(r.messages or 0 for r in rows)} messages"
          + (f", {bad} unreadable" if bad else ""))
    return EXIT_FAILED if bad else EXIT_OK


def show_compact(args: argparse.Namespace, results: Sequence[Any], skipped: Sequence[str]
                 ) -> int:
    merged = sum(1 for r in results if r.merged)
    code = EXIT_OK if args.dry_run or merged == len(results) else EXIT_FAILED
    if args.json:
        print_json({"segments": [_row(r) for r in results], "skipped": list(skipped),
                    "merged": merged})
        return code
    for row in results:
        status = "merged" if row.merged else f"NOT merged: {row.error}"
        print(f"{row.topic}/{row.queue_id} {row.file_type} @{row.base_offset} "
              f"({row.state}, {row.chunks} chunks): {status}")
    for line in skipped:
        print(f"skipped {line}")
    print(f"{merged} of {len(results)} segments merged")
    return code


def show_logs(args: argparse.Namespace, rows: Sequence[Any]) -> int:
    code = EXIT_FAILED if any(r.error is not None for r in rows) else EXIT_OK
    if args.json:
        print_json({"brokers": [_row(r) for r in rows]})
        return code
    for r in rows:
        if r.error is not None:
            print(f"{r.broker}: NOT compacted: {r.error}")
            continue
        print(f"{r.broker}: {r.queues} queue(s); log objects {r.log_objects_before} -> "
              f"{r.log_objects_after} ({r.log_bytes_before} -> {r.log_bytes_after} bytes) "
              f"in {r.seconds:.1f} s")
    return code
