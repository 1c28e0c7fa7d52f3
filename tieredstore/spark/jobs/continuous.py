"""``export --continuous``: a Structured Streaming query from the ``tieredstore``
streaming source into an export table, each micro-batch committed once.

The query (:func:`export_stream`) reads the selected queues with the streaming
source (:mod:`tieredstore.spark.read.stream`) and hands each micro-batch to
:func:`export_batch` (``foreachBatch``), which writes and commits it with the
batch export's writer and commit (:func:`~tieredstore.spark.jobs.export.write_frame`,
:func:`~tieredstore.spark.jobs.export.commit_run`): the batch's files, each queue's
new end offset and the application transaction ``tieredstore-stream:<query
id>`` = batch id, in one Delta commit. Spark replays a batch it had not
recorded in its checkpoint with the same id and offsets; the transaction makes
the replay of a committed batch do nothing. docs/export.md, "Continuous
export", has the rules and what each kill point leaves.

A new checkpoint starts each queue at its exported end in the table, so a
table that batch runs filled goes on without a message twice. Messages that
retention removed before they were exported are skipped with a WARNING
(``failOnDataLoss=false``), as a batch run skips and reports them.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tieredstore.errors import ConfigError
from tieredstore.spark.jobs.export import (
    check_table,
    commit_run,
    open_export,
    queue_spans,
    write_frame,
)
from tieredstore.spark.jobs.table import (
    TARGET_FILE_SIZE,
    Location,
    TableError,
    exported_end,
    new_run_id,
    open_table,
    transaction,
)
from tieredstore.spark.options import READER_OPTIONS, lower_options, on_store
from tieredstore.spark.read.bound import bind
from tieredstore.spark.read.plan import queue_bounds
from tieredstore.spark.read.selection import Queue, selection_from_options
from tieredstore.spark.read.stream import offsets_json

log = logging.getLogger(__name__)

STREAM_APP_PREFIX = "tieredstore-stream:"
CHECKPOINT_DIR = "_tieredstore_checkpoint"  # in a local table; Delta leaves "_" names alone
DEFAULT_TRIGGER = "1 minute"
QUERY_ID_KEY = "sql.streaming.queryId"  # Spark's local property in a micro-batch
UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
INTERVAL = re.compile(r"\s*(\d+)\s*(ms|s|m|h|d|(?:millisecond|second|minute|hour|day)s?)\s*",
                      re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What a micro-batch did: ``version`` the Delta version it committed (None:
    nothing to commit, or ``replayed``, committed before)."""

    table: str
    batch: int
    rows: int
    version: int | None
    queues: int = 0
    replayed: bool = False


BatchReport = Callable[[BatchResult], None]


def processing_time(text: str) -> str:
    """A trigger interval (``30s``, ``1m``, ``500ms``, ``2 minutes`` ...) as Spark's
    processing-time string."""
    match = INTERVAL.fullmatch(text)
    if match is None or int(match[1]) < 1:
        raise ConfigError("trigger", f"must be an interval such as 30s, 1m, 1h, 500ms or "
                          f"'2 minutes', got {text!r}")
    unit = match[2].lower()
    return f"{int(match[1])} {UNITS.get(unit, unit.rstrip('s') + 's')}"


def checkpoint_location(where: Location, checkpoint: str | None) -> str:
    """Where the query keeps its checkpoint: ``checkpoint`` (a relative path made
    absolute), else ``CHECKPOINT_DIR`` in a local table."""
    if checkpoint:
        return checkpoint if "://" in checkpoint else str(Path(checkpoint).absolute())
    if where.s3:
        raise ConfigError("checkpoint", f"an S3 table ({where.uri}) needs --checkpoint: a "
                          "directory Spark can write (local or shared, or s3a:// where "
                          "the cluster has hadoop-aws)")
    return str(Path(where.uri) / CHECKPOINT_DIR)


def export_stream(spark: Any, options: Mapping[str, str], output: str,
                  selected: Mapping[str, str], *, checkpoint: str | None = None,
                  trigger: str | None = None, available_now: bool = False,
                  max_messages: int = 0, report: BatchReport | None = None,
                  target_file_size: int = TARGET_FILE_SIZE,
                  table_settings: Mapping[str, str] | None = None) -> Any:
    """Start the query that exports the queues ``selected`` names (reader options
    ``broker``, ``topic``, ``queue_id``) of the store ``options`` name to the table
    at ``output``, a micro-batch every ``trigger`` (None: ``DEFAULT_TRIGGER``; or,
    ``available_now``, what is
    there now, then it ends), at most ``max_messages`` a batch (0: no limit), in
    data files of about ``target_file_size`` bytes at most; the StreamingQuery.
    ``report`` is called with each batch's result. An S3 table is written with
    the store's S3 settings, or ``table_settings``' (as :func:`export_table`'s)."""
    config, where, source, table = open_export(options, output, table_settings)
    location = checkpoint_location(where, checkpoint)
    selection = selection_from_options(lower_options(selected))
    bounds = on_store(config, lambda store: queue_bounds(store, config, selection))
    starting = {q: end for q in bounds if (end := exported_end(table, *q)) is not None}
    reader = {k: v for k, v in lower_options(options).items()
              if k in READER_OPTIONS and k != "config"}
    reader.update(selected)
    reader["startingOffsets"] = json.dumps(offsets_json(starting), ensure_ascii=False)
    # As a batch run: messages retention removed before they were exported are
    # skipped (a WARNING counts them), not a query stopped for good.
    reader["failOnDataLoss"] = "false"
    if max_messages:
        reader["maxOffsetsPerTrigger"] = str(max_messages)
    stream = spark.readStream.format(bind(spark, config)).options(**reader).load()
    writer = (stream.writeStream
              .foreachBatch(functools.partial(export_batch, where=where, source=source,
                                              report=report, target_size=target_file_size))
              .option("checkpointLocation", location))
    writer = (writer.trigger(availableNow=True) if available_now
              else writer.trigger(processingTime=processing_time(trigger
                                                                 or DEFAULT_TRIGGER)))
    return writer.start()


def export_batch(df: Any, batch: int, *, where: Location, source: str,
                 report: BatchReport | None = None,
                 target_size: int = TARGET_FILE_SIZE) -> BatchResult:
    """Write and commit micro-batch ``batch`` (``foreachBatch``); nothing if the table
    holds it already (a replay). See the module docstring."""
    query = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_KEY)
    if not query:
        raise TableError(where.uri, f"micro-batch {batch} came without its streaming "
                         "query's id: export_batch is a streaming query's foreachBatch")
    app = STREAM_APP_PREFIX + query
    table = open_table(where)
    check_table(where, table, source)
    done = transaction(table, app)
    if done is not None and done >= batch:
        log.info("%s: batch %d of query %s was committed before: nothing to do",
                 where.uri, batch, query)
        return _reported(report, BatchResult(where.uri, batch, 0, None, replayed=True))
    run = new_run_id()
    files = write_frame(df, where, run, target_size)
    spans = queue_spans(files)
    problems = []
    for q, (count, lo, hi) in sorted(spans.items()):
        end = exported_end(table, *q)
        if count != hi - lo + 1:
            problems.append(f"{_name(q)}: {count} rows for offsets [{lo}, {hi}]")
        elif end is not None and lo < end:
            problems.append(f"{_name(q)}: offsets from {lo} are in the table already (up "
                            f"to {end}): another export writes this queue")
    if problems:
        raise TableError(where.uri, f"micro-batch {batch} of query {query}: "
                         + "; ".join(problems[:5]) + f"; nothing committed (run {run})")
    rows = sum(f.rows for f in files)
    if not files:
        return _reported(report, BatchResult(where.uri, batch, 0, None))
    version = commit_run(where, table, source, files, run=run,
                         ends={q: hi + 1 for q, (_, _, hi) in spans.items()},
                         info={"run": run, "rows": rows, "query": query, "batch": batch},
                         transactions={app: batch})
    return _reported(report, BatchResult(where.uri, batch, rows, version, len(spans)))


def _name(queue: Queue) -> str:
    return "/".join(str(part) for part in queue)


def _reported(report: BatchReport | None, result: BatchResult) -> BatchResult:
    if report is not None:
        report(result)
    return result
