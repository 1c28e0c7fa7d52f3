"""``export``: a store's queues appended to a Parquet table, each message exactly once.

A run (under the table's lock, :mod:`tieredstore.spark.table`):

1. finishes what a crashed run left (roll forward a committed run's moves,
   roll back uncommitted staging) and reads the newest commit: each queue's
   next offset to export, a queue being ``(broker, topic, queue id)``;
2. takes each selected queue's end offset now (of every broker of the cluster
   selected), so the run is bounded: it
   exports ``[next, end)`` of each queue (from the queue's first stored offset
   for a queue not exported before, or whose next offsets retention removed);
3. reads exactly those ranges through the DataSource (option
   ``queue_offsets``), bound to the configuration this run resolved
   (:mod:`tieredstore.spark.bound`) and has Spark write them, partitioned by
   ``broker``, ``topic`` and ``date`` (the UTC day of ``store_timestamp``),
   into the run's hidden staging directory;
4. checks that the staged rows are each queue's range, each offset once
   (count, distinct offsets, min and max per queue), else fails and shows
   nothing;
5. writes the commit (the new next offsets, the run's files), then moves the
   files into their partitions.

A run with nothing new writes nothing (step 1 aside) and returns 0 rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from tieredstore.config import TieredStoreConfig
from tieredstore.spark.bound import bind
from tieredstore.spark.options import (
    READER_OPTIONS,
    config_from_options,
    lower_options,
    on_store,
)
from tieredstore.spark.plan import queue_bounds
from tieredstore.spark.selection import Selection, queue_offsets_option
from tieredstore.spark.table import (
    Commit,
    StepHook,
    Table,
    TableError,
    new_run_id,
    next_commit,
    table_root,
)
from tieredstore.store import ObjectStore

PARTITION_COLUMNS = ("broker", "topic", "date")
# The UTC day of store_timestamp, whatever the session's time zone.
DATE_EXPR = "date_from_unix_date(CAST(floor(unix_micros(store_timestamp) / 86400000000) AS INT))"
# The columns step 4 reads back from staging; broker and topic strings even where
# their values look like numbers (Spark would infer a number from the directory names).
CHECK_SCHEMA = "queue_id int, offset long, broker string, topic string, date date"

Range = tuple[str, str, int, int, int]  # broker, topic, queue id, from (incl.), to (excl.)


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What a run did. ``sequence``: the commit it wrote (None: nothing new);
    ``trimmed``: queues whose next offsets retention removed before they were
    exported, as (broker, topic, queue id, next offset, first stored offset)."""

    table: str
    rows: int
    sequence: int | None
    ranges: tuple[Range, ...] = ()
    trimmed: tuple[Range, ...] = ()


def export_table(spark: Any, options: Mapping[str, str], output: str, selection: Selection,
                 *, on_step: StepHook | None = None) -> ExportResult:
    """Append the selected queues' messages past their last exported offsets to the
    table at ``output`` (see the module docstring)."""
    root = table_root(output)
    config = config_from_options(options)
    source = store_source(config)
    with Table.locked(root, on_step) as table:
        last = table.recover()
        if last is not None and last.source != source:
            raise TableError(root, f"it holds the queues of store {last.source!r}, not of "
                             f"{source!r}: export each store to a table of its own")
        ranges, trimmed = on_store(config, lambda store: queue_ranges(
            store, config, selection, last, table=root))
        table.on_step("bounded")
        todo = tuple(r for r in ranges if r[4] > r[3])
        named = {"broker": {r[0] for r in todo}, "topic": {r[1] for r in todo}}
        for column, values in named.items():
            for name in sorted(values):
                unfit = partition_unfit(column, name)
                if unfit is not None:
                    raise TableError(root, f"{column} {name!r} cannot be a partition of the "
                                     f"table: {unfit}; select the other {column}s "
                                     f"(--{column})")
        if not todo:
            return ExportResult(str(root), 0, None, (), trimmed)
        run = new_run_id()
        try:
            rows = _stage(spark, table, run, todo, config=config, options=options)
            files = table.staged_files(run)
            if not files:
                raise TableError(root, f"Spark wrote {rows} rows, but no file is in "
                                 f"{table.staging(run)}; nothing committed")
            commit = next_commit(last, run, source, ranges=todo, files=files, rows=rows)
            table.on_step("staged")
            table.commit(commit)
        except BaseException:
            table.abandon(run)
            raise
        table.publish(commit)
        return ExportResult(str(root), rows, commit.sequence, todo, trimmed)


def store_source(config: TieredStoreConfig) -> str:
    """Which cluster a table's offsets are of: where its bucket is (the S3 bucket,
    or the local store's directory) and the cluster's keys in it. Two buckets
    with the same key prefix and cluster are two sources."""
    where = (f"s3://{config.s3_bucket}" if config.backend == "s3"
             else f"{config.backend}:{config.local_path}")
    return f"{where}/{config.key_prefix}/{config.cluster}"


async def queue_ranges(store: ObjectStore, config: TieredStoreConfig, selection: Selection,
                       last: Commit | None, *, table: Path
                       ) -> tuple[tuple[Range, ...], tuple[Range, ...]]:
    """Each selected queue's range to export now (after ``last``, the table's newest
    commit), and the queues retention trimmed past their next offset. Each
    broker's log is loaded once for all its queues."""
    ranges, trimmed = [], []
    for (b, t, q), (first, end) in (await queue_bounds(store, config, selection)).items():
        done = last.next_offset(b, t, q) if last is not None else None
        if done is not None and done > end:
            raise TableError(table, f"queue {b}/{t}/{q} was exported up to offset "
                             f"{done}, but the store's queue ends at {end}: "
                             "not the store this table was exported from")
        start = first if done is None else max(done, first)
        if done is not None and done < first:
            trimmed.append((b, t, q, done, first))
        ranges.append((b, t, q, start, end))
    return tuple(sorted(ranges)), tuple(trimmed)


# What Spark escapes in a partition directory's name (as %XX), and the name it
# gives a null value; a directory name's limit in bytes.
HIVE_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(1, 32)}
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
NAME_MAX = 255


def partition_unfit(column: str, value: str) -> str | None:
    """Why ``value`` cannot be a ``{column}=...`` directory Spark writes and reads
    back as itself, or None."""
    if value == HIVE_NULL:
        return f"Spark reads the directory {column}={HIVE_NULL} back as a null {column}"
    name = f"{column}=" + "".join(f"%{ord(c):02X}" if c in HIVE_ESCAPED else c for c in value)
    if len(name.encode()) > NAME_MAX:
        return (f"its directory name, escaped, is {len(name.encode())} bytes, past the "
                f"{NAME_MAX} a file name may have")
    return None


def hadoop_path(path: Path, *, glob: bool = False) -> str:
    """A local ``path`` as Spark's Hadoop paths take it: its own characters behind
    the scheme (Hadoop quotes a URI's escapes again: ``a%20b`` would name a
    directory ``a%20b``); for a read, which Spark expands as a pattern, its
    pattern characters escaped (``t[1]`` names ``t[1]``, not ``t1``)."""
    text = "file://" + str(path)
    return re.sub(r"([\\{}\[\]*?])", r"\\\1", text) if glob else text


def _stage(spark: Any, table: Table, run: str, ranges: tuple[Range, ...], *,
           config: TieredStoreConfig, options: Mapping[str, str]) -> int:
    """Spark writes ``ranges``, read through the format bound to ``config``
    (:func:`~tieredstore.spark.bound.bind`: the configuration resolved here, not
    again from ``options`` in Spark's processes), into the run's staging
    directory; the rows written, checked against ``ranges``. ``options``: the
    reader's split (``messages_per_partition``, ``batch_rows``)."""
    reader = {k: v for k, v in lower_options(options).items()
              if k in READER_OPTIONS and k != "config"}
    reader["queue_offsets"] = queue_offsets_option({(b, t, q): (lo, hi)
                                                    for b, t, q, lo, hi in ranges})
    staging = hadoop_path(table.staging(run))
    df = spark.read.format(bind(spark, config)).options(**reader).load()
    df.withColumn("date", F.expr(DATE_EXPR)).write.mode("errorifexists") \
        .partitionBy(*PARTITION_COLUMNS).parquet(staging)
    staged_df = spark.read.schema(CHECK_SCHEMA).parquet(hadoop_path(table.staging(run),
                                                                   glob=True))
    got = staged_df.groupBy("broker", "topic", "queue_id").agg(
        F.count("*").alias("n"), F.countDistinct("offset").alias("distinct"),
        F.min("offset").alias("lo"), F.max("offset").alias("hi"),
    ).collect()
    staged = {(r.broker, r.topic, r.queue_id): (r.n, r.distinct, r.lo, r.hi) for r in got}
    wanted = {(b, t, q): (hi - lo, hi - lo, lo, hi - 1) for b, t, q, lo, hi in ranges}
    if staged != wanted:
        wrong = sorted(k for k in staged.keys() | wanted.keys()
                       if staged.get(k) != wanted.get(k))[:5]
        raise TableError(table.root, "the staged rows are not the ranges read (count, "
                         "distinct offsets, min, max per queue): " + "; ".join(
                             f"{b}/{t}/{q} staged {staged.get((b, t, q))}, wanted "
                             f"{wanted.get((b, t, q))}" for b, t, q in wrong)
                         + "; nothing committed")
    return sum(counts[0] for counts in staged.values())
