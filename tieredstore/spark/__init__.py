"""Spark over a tiered store: a Python DataSource and maintenance jobs.

Reading::

    from tieredstore.spark import get_session   # or register(spark) on your own session
    spark = get_session()                        # local[*] on loopback
    df = spark.read.format("tieredstore").option("path", "/data/store").load()

Columns: ``topic`` string, ``broker`` string, ``queue_id`` int, ``offset``
long, ``store_timestamp`` timestamp, ``keys`` array<string>, ``tags`` string
(null: none), ``properties`` map<string,string>, ``body`` binary. Every
broker of the store's cluster is read (a queue is ``(broker, topic,
queue_id)``, a row's identity ``(broker, topic, queue_id, offset)``).

Options. The store: ``path`` (the local backend's directory), or
``backend=s3`` with ``bucket``, ``endpoint``, ``region``, ``access_key_id``,
``secret_access_key``, ``addressing_style``; ``cluster``, ``key_prefix``;
``config`` (a TOML file); any other config key by its name.
An option that is none of these nor one below is an error naming it and the
known option it most resembles (``topik``: did you mean ``topic``?).
The selection, exact: ``broker``, ``topic`` and ``queue_id`` (comma-separated
lists; ``broker`` selects brokers of the cluster, not a store config),
``offset_from`` (inclusive) / ``offset_to`` (exclusive), ``time_from``
(inclusive) / ``time_to`` (exclusive) as ISO 8601 (naive means UTC) or ms;
``queue_offsets``, a JSON list of ``[broker, topic, queue_id, from, to]``: only those
queues, each within its own offsets (what ``export`` reads with).
The split: ``messages_per_partition`` (0: one partition per segment),
``batch_rows``. Store options are resolved in the Python process Spark starts
to plan the read, in the JVM's environment; :func:`bind` gives a format bound
to a configuration resolved in this process instead (credentials held by the
driver only; see :mod:`tieredstore.spark.read.bound`), taking the selection and the
split only. A ``broker``, ``topic`` or ``queue_id`` the cluster does not
list (on the brokers selected) is an error naming it.

The selection options choose segments from metadata before any data is read.
Spark filters (``df.where(...)``) are applied to the rows but never pushed
into the read, so a ``where`` on ``offset`` still reads every segment of the
queues the options select: PySpark 4.1 to 4.3 hand one scan's pushed read plan
to the other scans of the same DataFrame, which made a reader that pruned by
them return wrong rows (how, and the reproduction:
:mod:`tieredstore.spark.read.pushdown`). To prune, select with the options. With
``spark.sql.python.filterPushdown.enabled`` on, a ``where`` on ``topic``,
``queue_id``, ``offset`` or ``store_timestamp`` that the options do not already
cover logs a warning naming the options that would select the same.
Time selection assumes, as the store's own time lookup does, that store
timestamps do not decrease along a queue.

Offloaded ledgers: ``spark.read.format("tieredstore-ledger")`` (see
:mod:`tieredstore.spark.read.ledger_source`): managed ledger, ledger id, entry id,
payload and offload uuid per row.

Registration: an installed ``tieredstore`` ships the top-level modules
``pyspark_tieredstore`` and ``pyspark_tieredstore_ledger``, which PySpark
finds and registers by itself, so a plain ``SparkSession`` reads both formats
with no call (PySpark 4.0 and later; an editable install shows them in
setuptools' compat mode only, as ``make`` installs it; elsewhere call
``register(spark)``). :func:`get_session` registers them itself.

A cluster: the workers need Python (``python3.X``, the driver's minor
version) and Spark only. :func:`get_session` with a master that is not
``local`` ships tieredstore and its dependencies as one archive (:func:`pack`,
:mod:`tieredstore.spark.shipping`); for spark-submit, ``tieredstore spark
pack`` prints the line that ships it.

Jobs: ``tieredstore spark export|verify|compact|stats`` (see
:mod:`tieredstore.spark.jobs`), or these functions with a SparkSession:
:func:`export`, :func:`export_continuous`, :func:`verify_reports`,
:func:`compact`, :func:`compact_logs`, :func:`stats`.
"""

from tieredstore.spark.jobs import (
    Filters,
    check_options,
    compact,
    compact_logs,
    export,
    export_continuous,
    stats,
    verify_reports,
)
from tieredstore.spark.jobs.continuous import processing_time
from tieredstore.spark.jobs.table import (
    TABLE_KEYS,
    Optimized,
    TableError,
    optimize_table,
    vacuum_table,
)
from tieredstore.spark.options import FORMAT_NAME
from tieredstore.spark.read.batches import SCHEMA
from tieredstore.spark.read.bound import bind
from tieredstore.spark.read.datasource import TieredStoreDataSource
from tieredstore.spark.read.ledger_source import LEDGER_SCHEMA, TieredStoreLedgerDataSource
from tieredstore.spark.session import get_session, register, session_running
from tieredstore.spark.shipping import Pack, PackError, pack
from tieredstore.store import ScanError

__all__ = ["FORMAT_NAME", "LEDGER_SCHEMA", "SCHEMA", "TABLE_KEYS", "Filters", "Optimized", "Pack",
           "PackError", "TableError",
           "ScanError", "TieredStoreDataSource", "TieredStoreLedgerDataSource", "bind",
           "check_options", "compact", "compact_logs", "export", "export_continuous",
           "get_session", "pack", "register", "session_running", "stats", "verify_reports",
           "optimize_table", "processing_time", "vacuum_table"]
