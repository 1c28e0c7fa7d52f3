"""Spark over a tiered store: a Python DataSource and maintenance jobs.

Reading::

    from tieredstore.spark import get_session   # or register(spark) on your own session
    spark = get_session()                        # local[*] on loopback
    df = spark.read.format("tieredstore").option("path", "/data/store").load()

Columns: ``topic`` string, ``queue_id`` int, ``offset`` long, ``store_timestamp``
timestamp, ``keys`` array<string>, ``tags`` string (null: none),
``properties`` map<string,string>, ``body`` binary.

Options. The store: ``path`` (the local backend's directory), or
``backend=s3`` with ``bucket``, ``endpoint``, ``region``, ``access_key_id``,
``secret_access_key``, ``addressing_style``; ``cluster``, ``broker``,
``key_prefix``; ``config`` (a TOML file); any other config key by its name.
The selection, exact: ``topic`` and ``queue_id`` (comma-separated lists),
``offset_from`` (inclusive) / ``offset_to`` (exclusive), ``time_from``
(inclusive) / ``time_to`` (exclusive) as ISO 8601 (naive means UTC) or ms.
The split: ``messages_per_partition`` (0: one partition per segment),
``batch_rows``.

The selection options choose segments from metadata before any data is read.
Spark filters (``df.where(...)``) are applied to the rows but never pushed
into the reader: PySpark reuses one query's pushed-down read plan for the
next query over the same DataFrame, which returned wrong rows (see
:mod:`tieredstore.spark.datasource`). To prune, select with the options.
Time selection assumes, as the store's own time lookup does, that store
timestamps do not decrease along a queue.

Jobs: ``python -m tieredstore.spark.jobs export|verify|compact`` (see
:mod:`tieredstore.spark.jobs`).
"""

from tieredstore.spark.datasource import SCHEMA, TieredStoreDataSource
from tieredstore.spark.options import FORMAT_NAME
from tieredstore.spark.scan import ScanError
from tieredstore.spark.session import get_session, register

__all__ = ["FORMAT_NAME", "SCHEMA", "ScanError", "TieredStoreDataSource", "get_session",
           "register"]
