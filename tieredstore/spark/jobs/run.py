"""Spark jobs over a store: export, verify, compact, stats.

Their command line is ``tieredstore spark`` (:mod:`tieredstore.cli.spark.jobs`,
which renders what these functions return)::

    tieredstore spark [--master M] export  --data-dir DIR --output OUT [--topic T] [--queue Q]
    tieredstore spark [--master M] export  ... --continuous [--trigger 1m | --available-now]
    tieredstore spark [--master M] verify  --data-dir DIR [--topic T] [--queue Q]
    tieredstore spark [--master M] compact --data-dir DIR [--dry-run]
    tieredstore spark [--master M] stats   --bucket B --endpoint URL [--topic T] [--queue Q]
    spark-submit ... tieredstore_job.py verify ...   (the line ``tieredstore spark pack`` prints)

Run by ``python``, the master is ``local[*]`` unless ``--master`` says
otherwise, and a local master binds to loopback only; a cluster's master gets
this environment shipped to its workers (:mod:`tieredstore.spark.shipping`).
Run by spark-submit, its master applies. The store is named by the options
every ``tieredstore`` command takes (``--data-dir``, ``--bucket``,
``--endpoint``, ``--config`` ...), and ``--option KEY=VALUE`` for any other
config key.

- ``export --output OUT`` appends the selected queues' new messages to the
  Delta Lake table OUT, incrementally and exactly once: each run writes only
  the messages past each queue's exported end offset (up to its end when the
  run began), partitioned by topic and ``date`` (the UTC day of
  ``store_timestamp``), and commits them with each queue's new end offset as
  one Delta commit (delta-rs). A run killed before its commit shows nothing;
  the next run redoes it. Nothing new: nothing written, exit status 0. OUT: a
  local directory (the same path on every node), ``file://`` or
  ``s3://bucket/path``. See :mod:`tieredstore.spark.jobs.export` and
  docs/export.md, "Export tables". ``--continuous [--checkpoint DIR] [--trigger
  1m | --available-now]`` runs a streaming query instead, each micro-batch
  committed once (:mod:`tieredstore.spark.jobs.continuous`; docs/export.md,
  "Continuous export").
- ``verify`` reads every message of the selected queues, checks every CRC and
  that offsets run on without gaps, and prints the report ``tieredstore
  verify`` prints (one row per queue, the same ``--json``); the exit status is
  1 if any error was found.
- ``compact`` merges sealed segments left unmerged, one task per segment, and
  never touches a queue's active segment; exit status 1 if a merge failed.
  ``compact --log [--log-broker B ...]`` instead compacts each broker's backlog
  of log objects into chunks, one task per broker, with the store's own code
  (it takes each broker's store over: run it with the brokers stopped).
- ``stats`` prints one row per queue: messages, offsets, bytes, segments,
  chunk objects, sealed segments not yet merged, the store timestamps of the
  first and last message; exit status 1 if a queue could not be read.

Each job is a function of a SparkSession and the reader options: :func:`export`,
:func:`verify_reports` (:func:`verify`), :func:`compact`, :func:`compact_logs`,
:func:`stats`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.spark.jobs.compact import compact_result, compact_segment, survey
from tieredstore.spark.jobs.continuous import BatchReport, export_stream
from tieredstore.spark.jobs.export import ExportResult, export_table
from tieredstore.spark.jobs.logs import LOGS_SCHEMA, compact_broker_log
from tieredstore.spark.jobs.stats import STATS_SCHEMA, QueueTask, queue_stats
from tieredstore.spark.jobs.table import TARGET_FILE_SIZE, StepHook
from tieredstore.spark.jobs.verify import combine, verify_task
from tieredstore.spark.options import (
    SELECTION_OPTIONS,
    check_known,
    config_from_options,
    lower_options,
    on_store,
)
from tieredstore.spark.read.plan import find_queues
from tieredstore.spark.read.selection import Selection, selection_from_options
from tieredstore.spark.read.selection import names as selection_names
from tieredstore.store import ObjectStore, VerifyReport, load_log, queue_log_pieces

T = TypeVar("T")
QUEUE_OPTIONS = ("broker", "topic", "queue_id")  # the options that select whole queues

VERIFY_SCHEMA = ("broker string, topic string, queue_id int, min_offset long, max_offset long, "
                 "segments int, messages long, undispatched long, dead_bytes long, units long, "
                 "checked_bytes long, error_count long, errors array<string>")
COMPACT_SCHEMA = ("topic string, queue_id int, file_type string, base_offset long, "
                  "state string, chunks int, merged boolean, parts int, bytes_copied long, "
                  "bytes_reuploaded long, error string")


@dataclass(frozen=True, slots=True)
class Filters:
    """Which messages a job works on. Offsets and times: from inclusive, to exclusive;
    times as ISO 8601 (naive means UTC) or milliseconds since the epoch."""

    topics: tuple[str, ...] = ()
    queue_ids: tuple[int, ...] = ()
    brokers: tuple[str, ...] = ()
    offset_from: int | None = None
    offset_to: int | None = None
    time_from: str | None = None
    time_to: str | None = None

    def selection(self) -> Selection:
        """Brokers, topics and queues (what verify and compact select by), as the
        reader selects."""
        return selection_from_options({k: v for k, v in self.options().items()
                                       if k in QUEUE_OPTIONS})

    def options(self) -> dict[str, str]:
        """The reader's selection options for these filters (exact, and they prune
        segments before any data is read)."""
        out: dict[str, str] = {}
        if self.brokers:
            out["broker"] = ",".join(self.brokers)
        if self.topics:
            out["topic"] = ",".join(self.topics)
        if self.queue_ids:
            out["queue_id"] = ",".join(str(q) for q in self.queue_ids)
        for name in ("offset_from", "offset_to", "time_from", "time_to"):
            value = getattr(self, name)
            if value is not None:
                out[name] = str(value)
        return out


def check_options(options: dict[str, str]) -> None:
    """A job's options name only config keys, their aliases and the reader's
    options (an unknown one is a :class:`ConfigError` naming the option it most
    resembles): the check the jobs make, for a caller to make before it starts
    Spark."""
    check_known(lower_options(options), SELECTION_OPTIONS)


def export(spark: Any, options: dict[str, str], output: str, filters: Filters | None = None,
           *, on_step: StepHook | None = None, target_file_size: int = TARGET_FILE_SIZE,
           table_settings: Mapping[str, str] | None = None) -> ExportResult:
    """Append the selected queues' messages not exported yet to the table at
    ``output`` (:func:`tieredstore.spark.jobs.export.export_table`); ``on_step``: called
    with each step's name as it completes; data files of about
    ``target_file_size`` bytes at most. Queues are selected by topic and queue id
    (and broker) only: the offsets are the table's to choose. ``table_settings``:
    the S3 settings of a table elsewhere than the store
    (:func:`tieredstore.spark.jobs.table.table_access`)."""
    selection = selection_from_options(_export_selection(options, filters))
    return export_table(spark, options, output, selection, on_step=on_step,
                        target_file_size=target_file_size, table_settings=table_settings)


def export_continuous(spark: Any, options: dict[str, str], output: str,
                      filters: Filters | None = None, *, checkpoint: str | None = None,
                      trigger: str | None = None, available_now: bool = False,
                      max_messages: int = 0, report: BatchReport | None = None,
                      target_file_size: int = TARGET_FILE_SIZE,
                      table_settings: Mapping[str, str] | None = None) -> Any:
    """Start the streaming query that exports the selected queues to the table at
    ``output`` a micro-batch at a time (every ``trigger``; None: a minute), each
    committed once
    (:func:`tieredstore.spark.jobs.continuous.export_stream`); the StreamingQuery
    (``awaitTermination()`` it; ``available_now`` ends once what was there at
    the start is exported). Queues are selected as :func:`export` selects."""
    return export_stream(spark, options, output, _export_selection(options, filters),
                         checkpoint=checkpoint, trigger=trigger, available_now=available_now,
                         max_messages=max_messages, report=report,
                         target_file_size=target_file_size, table_settings=table_settings)


def _export_selection(options: dict[str, str], filters: Filters | None) -> dict[str, str]:
    """The queue options (``broker``, ``topic``, ``queue_id``) an export selects by;
    an offset or time option is an error."""
    selected = {**options, **(filters or Filters()).options()}
    ranged = sorted(k for k in selected if k.lower() in SELECTION_OPTIONS
                    and k.lower() not in QUEUE_OPTIONS)
    if ranged:
        raise ConfigError(ranged[0], "export selects queues by broker, topic and queue id "
                          "only: each run exports what is past the table's last commit")
    return {k.lower(): v for k, v in selected.items() if k.lower() in QUEUE_OPTIONS}


def _per_queue(spark: Any, options: dict[str, str], filters: Filters | None,
               task: Callable[[TieredStoreConfig, QueueTask], T]) -> list[T]:
    """``task`` for each selected queue (of every broker selected), one Spark task
    each, with the queue's pieces of its broker's log, loaded once here."""
    config = config_from_options(options)

    async def queues(store: ObjectStore) -> list[QueueTask]:
        found = await find_queues(store, config, (filters or Filters()).selection())
        logs = {b: await load_log(store, config.replace(broker=b))
                for b in sorted({b for b, _, _ in found})}
        return [QueueTask(b, t, q, queue_log_pieces(logs[b], t, q)) for b, t, q in found]

    return _run_tasks(spark, functools.partial(task, config), on_store(config, queues))


def _run_tasks(spark: Any, func: Any, items: Sequence[Any]) -> list[Any]:
    """``func`` over ``items``, one Spark task each."""
    if not items:
        return []
    rdd = spark.sparkContext.parallelize(list(items), numSlices=len(items))
    return list(rdd.map(func).collect())


def verify_reports(spark: Any, options: dict[str, str], filters: Filters | None = None
                   ) -> VerifyReport:
    """Verify the selected queues (:func:`tieredstore.store.verify_queue`): one
    task per queue, one report of them all (the store's
    :class:`~tieredstore.store.VerifyReport`, as ``tieredstore verify`` makes)."""
    return combine(r for r in _per_queue(spark, options, filters, verify_task)
                   if r is not None)


def verify(spark: Any, options: dict[str, str], filters: Filters | None = None) -> Any:
    """:func:`verify_reports` as a DataFrame (``VERIFY_SCHEMA``): a row per
    queue, its columns :meth:`~tieredstore.store.QueueCheck.document`'s."""
    report = verify_reports(spark, options, filters)
    return spark.createDataFrame([tuple(c.document().values()) for c in report.queues],
                                 VERIFY_SCHEMA)


def one_broker(options: dict[str, str], brokers: frozenset[str] | None) -> TieredStoreConfig:
    """The store config of the options, for the one broker of ``brokers`` (or of
    the option ``broker``; none: the configured one)."""
    config = config_from_options(options)
    named = lower_options(options).get("broker")
    chosen = sorted(brokers or (selection_names(named) if named else [config.broker]))
    if len(chosen) != 1:
        raise ConfigError("broker", f"compact works on one broker at a time, got "
                          f"{', '.join(chosen)}")
    return config.replace(broker=chosen[0])


def compact(spark: Any, options: dict[str, str], filters: Filters | None = None, *,
            dry_run: bool = False) -> tuple[Any, list[str]]:
    """Merge sealed segments left unmerged, of one broker (the one option
    ``broker`` names, else the configured one): a DataFrame of what each task
    did (``COMPACT_SCHEMA``) and the segments left alone on purpose, with why."""
    selection = (filters or Filters()).selection()
    config = one_broker(options, selection.brokers)
    found = on_store(config, lambda store: survey(store, config, selection))
    if dry_run:
        results = [compact_result(t, merged=False, error="dry run") for t in found.targets]
    else:
        results = _run_tasks(spark, functools.partial(compact_segment, config), found.targets)
    rows = [dataclasses.astuple(r) for r in results]
    return spark.createDataFrame(rows, COMPACT_SCHEMA), found.skipped


def compact_logs(spark: Any, options: dict[str, str], brokers: Sequence[str] = ()) -> Any:
    """Compact the log backlog of each broker (default: the configured one), one task
    per broker, with the store's own code (:mod:`tieredstore.spark.jobs.logs`; it takes
    each broker's store over: run it with the brokers stopped). A DataFrame of
    ``LOGS_SCHEMA``."""
    config = config_from_options(options)
    named = lower_options(options).get("broker")
    names = list(dict.fromkeys(brokers)) or (selection_names(named) if named else
                                             [config.broker])
    rows = _run_tasks(spark, functools.partial(compact_broker_log, config), names)
    return spark.createDataFrame([dataclasses.astuple(r) for r in rows], LOGS_SCHEMA)


def stats(spark: Any, options: dict[str, str], filters: Filters | None = None) -> Any:
    """One row per selected queue (``STATS_SCHEMA``), one task per queue. Offset and
    time filters do not apply: a queue is summed up whole."""
    return spark.createDataFrame(_per_queue(spark, options, filters, queue_stats), STATS_SCHEMA)
