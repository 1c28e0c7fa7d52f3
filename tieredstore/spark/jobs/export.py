"""``export``: a store's queues appended to a Delta Lake table, each message exactly once.

A run:

1. opens the table (:mod:`tieredstore.spark.jobs.table`) at its newest version and
   reads each queue's exported end offset from it (a Delta application
   transaction per queue, ``(broker, topic, queue id)``);
2. takes each selected queue's end offset now (of every broker of the cluster
   selected), so the run is bounded: it exports ``[exported end, end)`` of each
   queue (from the queue's first stored offset for a queue not exported before,
   or whose exported end retention removed);
3. reads exactly those ranges through the DataSource (option
   ``queue_offsets``), bound to the configuration this run resolved
   (:mod:`tieredstore.spark.read.bound`); each Spark task writes its rows as Parquet
   data files into the table's location, one per partition (``topic``, and
   ``date``: the UTC day of ``store_timestamp``);
4. checks that the files hold each queue's range (count, min and max offset per
   queue), else fails and commits nothing;
5. commits the files and the queues' new end offsets as one Delta commit, based
   on the version read in step 1 (:func:`commit_run`): if another writer
   committed meanwhile and moved one of the run's queues, the commit fails and
   nothing of this run is visible; a commit that moved none of them (other
   queues, an optimize) only makes this one try again on the newer version.

A continuous export (:mod:`tieredstore.spark.jobs.continuous`) writes and commits
each micro-batch with :func:`write_frame` and :func:`commit_run`.

A run with nothing new writes nothing and returns 0 rows. A run killed before
step 5 leaves files in no commit: invisible, deleted by ``vacuum``; the next run
exports its ranges again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql import functions as F

from tieredstore.config import TieredStoreConfig
from tieredstore.spark.jobs.table import (
    TARGET_FILE_SIZE,
    DataFile,
    Location,
    StepHook,
    TableError,
    app_id,
    commit,
    exported_end,
    new_run_id,
    open_table,
    table_access,
    table_location,
    table_source,
    transaction,
    write_files,
)
from tieredstore.spark.options import (
    READER_OPTIONS,
    config_from_options,
    lower_options,
    on_store,
)
from tieredstore.spark.read.bound import bind
from tieredstore.spark.read.plan import queue_bounds
from tieredstore.spark.read.selection import Queue, Selection, queue_offsets_option
from tieredstore.store import ObjectStore

# The UTC day of store_timestamp, whatever the session's time zone.
DATE_EXPR = "date_from_unix_date(CAST(floor(unix_micros(store_timestamp) / 86400000000) AS INT))"
COMMIT_TRIES = 10  # commits made again after losing to a commit of other queues
Range = tuple[str, str, int, int, int]  # broker, topic, queue id, from (incl.), to (excl.)


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What a run did. ``sequence``: the Delta version it committed (None: nothing new);
    ``trimmed``: queues whose next offsets retention removed before they were
    exported, as (broker, topic, queue id, next offset, first stored offset)."""

    table: str
    rows: int
    sequence: int | None
    ranges: tuple[Range, ...] = ()
    trimmed: tuple[Range, ...] = ()


def export_table(spark: Any, options: Mapping[str, str], output: str, selection: Selection,
                 *, on_step: StepHook | None = None,
                 target_file_size: int = TARGET_FILE_SIZE,
                 table_settings: Mapping[str, str] | None = None) -> ExportResult:
    """Append the selected queues' messages past their exported end offsets to the
    Delta table at ``output`` (see the module docstring), in data files of about
    ``target_file_size`` bytes at most; an S3 table with the store's S3 settings,
    or ``table_settings``' (:func:`~tieredstore.spark.jobs.table.table_access`)."""
    step = on_step or (lambda name: None)
    config, where, source, table = open_export(options, output, table_settings)
    step("opened")
    ranges, trimmed = on_store(config, lambda store: queue_ranges(
        store, config, selection, table, name=where.uri))
    step("bounded")
    todo = tuple(r for r in ranges if r[4] > r[3])
    if not todo:
        return ExportResult(where.uri, 0, None, (), trimmed)
    run = new_run_id()
    files = _write(spark, where, run, todo, config=config, options=options,
                   target_size=target_file_size)
    rows = sum(f.rows for f in files)
    step("written")
    version = commit_run(where, table, source, files, run=run,
                         ends={r[:3]: r[4] for r in todo},
                         info={"run": run, "rows": rows, "ranges": [list(r) for r in todo]})
    step("committed")
    return ExportResult(where.uri, rows, version, todo, trimmed)


def open_export(options: Mapping[str, str], output: str,
                table_settings: Mapping[str, str] | None
                ) -> tuple[TieredStoreConfig, Location, str, Any]:
    """What an export of the store ``options`` name to the table at ``output``
    starts from: the store's config, the table's location (S3 settings as
    :func:`~tieredstore.spark.jobs.table.table_access` says), the store's source name
    and the table (None before its first commit), checked to be this store's."""
    config = config_from_options(options)
    where = table_location(output, table_access(config, table_settings))
    source = store_source(config)
    table = open_table(where)
    check_table(where, table, source)
    return config, where, source, table


def check_table(where: Location, table: Any, source: str) -> None:
    """:class:`TableError` unless ``table`` is None (no table yet) or an export table
    of the store ``source``."""
    held = None if table is None else table_source(table)
    if table is not None and held != source:
        raise TableError(where.uri, "it is not a table tieredstore spark export made"
                         if held is None else f"it holds the queues of store {held!r}, "
                         f"not of {source!r}: export each store to a table of its own")


def commit_run(where: Location, table: Any, source: str, files: Sequence[DataFile], *,
               run: str, ends: Mapping[Queue, int], info: Mapping[str, Any],
               transactions: Mapping[str, int] | None = None) -> int:
    """Commit a run's ``files``, its queues' new ``ends`` and ``transactions``
    (:func:`~tieredstore.spark.jobs.table.commit`) based on ``table``, the version the
    run started from; the version committed. A commit beaten by another writer's
    is made again on the newer version while none of the run's application
    transactions moved (an optimize, or an export of other queues, committed);
    if one did, :class:`TableError` naming it, unless the newer version holds
    exactly the run's own ``ends`` and ``transactions`` (given: a commit whose
    reply was lost took effect)."""
    apps = sorted({app_id(*q) for q in ends} | set(transactions or {}))
    base = {a: transaction(table, a) for a in apps}
    mine = {**{app_id(*q): e for q, e in ends.items()}, **(transactions or {})}
    error: Exception | None = None
    for _ in range(COMMIT_TRIES):
        try:
            return commit(where, table, source, files, ends=ends, info=info,
                          transactions=transactions)
        except Exception as exc:  # delta-rs raises its own kinds; the table tells
            error = exc
        now = open_table(where)
        if now is None or (table is not None and now.version() == table.version()):
            break  # nothing committed meanwhile: not a race
        if table_source(now) != source:
            raise TableError(where.uri, f"the commit of run {run} failed: the table was "
                             "created meanwhile for another store") from error
        held = {a: transaction(now, a) for a in apps}
        if transactions and held == mine:
            return int(now.version())
        moved = [a for a in apps if held[a] != base[a]]
        if moved:
            raise TableError(where.uri, f"the commit of run {run} failed: another export "
                             f"committed {moved[0]} (now {held[moved[0]]}, was "
                             f"{base[moved[0]]}) meanwhile (or this commit did, its reply "
                             "lost); this run's files are in no other commit (vacuum "
                             "deletes them), and a rerun exports what is left") from error
        table = now
    raise TableError(where.uri, f"the commit of run {run} failed ({error}); its files "
                     "are in no commit (vacuum deletes them), rerun the export") from error


def store_source(config: TieredStoreConfig) -> str:
    """Which cluster a table's offsets are of: where its bucket is (the S3 bucket,
    or the local store's directory) and the cluster's keys in it. Two buckets
    with the same key prefix and cluster are two sources."""
    where = (f"s3://{config.s3_bucket}" if config.backend == "s3"
             else f"{config.backend}:{config.local_path}")
    return f"{where}/{config.key_prefix}/{config.cluster}"


async def queue_ranges(store: ObjectStore, config: TieredStoreConfig, selection: Selection,
                       table: Any, *, name: str
                       ) -> tuple[tuple[Range, ...], tuple[Range, ...]]:
    """Each selected queue's range to export now (after ``last``, the table's newest
    commit), and the queues retention trimmed past their next offset. Each
    broker's log is loaded once for all its queues."""
    ranges, trimmed = [], []
    for (b, t, q), (first, end) in (await queue_bounds(store, config, selection)).items():
        done = exported_end(table, b, t, q)
        if done is not None and done > end:
            raise TableError(name, f"queue {b}/{t}/{q} was exported up to offset "
                             f"{done}, but the store's queue ends at {end}: "
                             "not the store this table was exported from")
        start = first if done is None else max(done, first)
        if done is not None and done < first:
            trimmed.append((b, t, q, done, first))
        ranges.append((b, t, q, start, end))
    return tuple(sorted(ranges)), tuple(trimmed)


# The rows a task gets (store_timestamp in microseconds, as Spark hands a long
# to Python whatever the session's time zone).
ROW_SCHEMA = pa.schema([("broker", pa.string()), ("topic", pa.string()),
                        ("queue_id", pa.int32()), ("offset", pa.int64()),
                        ("store_timestamp", pa.int64()), ("keys", pa.list_(pa.string())),
                        ("tags", pa.string()), ("properties", pa.map_(pa.string(), pa.string())),
                        ("body", pa.binary()), ("date", pa.date32())])


def _write(spark: Any, where: Location, run: str, ranges: tuple[Range, ...], *,
           config: TieredStoreConfig, options: Mapping[str, str],
           target_size: int) -> list[DataFile]:
    """Executors read ``ranges`` through the format bound to ``config``
    (:func:`~tieredstore.spark.read.bound.bind`: the configuration resolved here, not
    again from ``options`` in Spark's processes) and write them as the table's
    data files; the files, checked against ``ranges`` (count, min and max
    offset per queue). ``options``: the reader's split (``messages_per_partition``,
    ``batch_rows``)."""
    reader = {k: v for k, v in lower_options(options).items()
              if k in READER_OPTIONS and k != "config"}
    reader["queue_offsets"] = queue_offsets_option({(b, t, q): (lo, hi)
                                                    for b, t, q, lo, hi in ranges})
    got = write_frame(spark.read.format(bind(spark, config)).options(**reader).load(),
                      where, run, target_size)
    seen = queue_spans(got)
    wanted = {(b, t, q): (hi - lo, lo, hi - 1) for b, t, q, lo, hi in ranges}
    if seen != wanted:
        wrong = sorted(k for k in seen.keys() | wanted.keys()
                       if seen.get(k) != wanted.get(k))[:5]
        raise TableError(where.uri, "the rows written are not the ranges read (count, min, "
                         "max offset per queue): " + "; ".join(
                             f"{b}/{t}/{q} written {seen.get((b, t, q))}, wanted "
                             f"{wanted.get((b, t, q))}" for b, t, q in wrong)
                         + f"; nothing committed (run {run})")
    return got


def write_frame(df: Any, where: Location, run: str,
                target_size: int = TARGET_FILE_SIZE) -> list[DataFile]:
    """Spark tasks write ``df``'s rows (the source's columns) as the table's data
    files of about ``target_size`` bytes at most
    (:func:`~tieredstore.spark.jobs.table.write_files`); the files written."""
    df = df.select("broker", "topic", "queue_id", "offset",
                   F.expr("unix_micros(store_timestamp)").alias("store_timestamp"),
                   "keys", "tags", "properties", "body", F.expr(DATE_EXPR).alias("date"))

    def task(number: int, rows: Iterator[Any]) -> Iterator[DataFile]:
        # Rows, not Arrow (mapInArrow needs pandas): a first step.
        batch = pa.RecordBatch.from_pylist([r.asDict() for r in rows], schema=ROW_SCHEMA)
        yield from write_files(where, run, number, iter([batch]), target_size)

    return list(df.rdd.mapPartitionsWithIndex(task).collect())


def queue_spans(files: Sequence[DataFile]) -> dict[Queue, tuple[int, int, int]]:
    """Each queue's rows in ``files``: (count, min offset, max offset)."""
    seen: dict[Queue, tuple[int, int, int]] = {}
    for f in files:
        for b, t, q, n, lo, hi in json.loads(f.queues):
            was = seen.get((b, t, q))
            seen[(b, t, q)] = (n, lo, hi) if was is None else (
                was[0] + n, min(was[1], lo), max(was[2], hi))
    return seen
