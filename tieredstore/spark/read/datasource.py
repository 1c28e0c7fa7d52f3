"""``spark.read.format("tieredstore")``: a PySpark 4 Python DataSource over a store.

One input partition per sealed consume-queue segment (optionally split, see
``messages_per_partition``), plus one per queue for its active tail, of
every broker of the store's cluster (option ``broker``: of those it lists);
a row's identity is ``(broker, topic, queue_id, offset)``. The
reader options ``broker``, ``topic``, ``queue_id``, ``offset_from``/``offset_to`` and
``time_from``/``time_to`` choose segments from metadata alone, before any data
is read, and select rows exactly.

Spark's own filters (``df.where(...)``) are applied to the rows but not pushed
into the read: PySpark (4.1 to 4.3 at least) hands one scan's pushed read plan
to the other scans of the same DataFrame, so no reader can plan from a query's
own filters (:mod:`tieredstore.spark.read.pushdown` has how, and the reproduction).
The plan depends on the reader options alone, the same for every query over
the DataFrame. With ``spark.sql.python.filterPushdown.enabled`` on, the reader
sees the filters, returns them all to Spark and logs which reader options
would have selected the same segments.

Rows come out as Arrow record batches, built from the store's scan in
columns (``scan_planned``, ``ScanSpec.for_slice``: every check of a read, made
over numpy arrays, no Python object per row) with C calls only: the bodies
cut out of the records read by Arrow (one copy), offsets and store times from
their arrays, constant and empty columns made whole. The scan runs one block
ahead of Spark on the task's event loop thread (``sync.iterate(ahead=1)``),
and a worker process freezes the objects it holds at its first read
(``gc.freeze``: PySpark collects garbage after every task). The store's config is
resolved where the read is planned (from the options, or the one a bound
format carries: :mod:`tieredstore.spark.read.bound`) and travels with the reader
to the executors; a broker, topic or queue id the cluster does not list is an error
naming it (:func:`~tieredstore.spark.read.plan.find_queues`). Each task opens its own
store, fetcher and event loop, and reads strictly read-only (it never claims
a queue or writes an object).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from tieredstore.errors import ConfigError
from tieredstore.spark.options import FORMAT_NAME, SELECTION_OPTIONS, int_option, lower_options
from tieredstore.spark.read.batches import BATCH_ROWS, SCHEMA
from tieredstore.spark.read.pushdown import in_pushdown_planning
from tieredstore.spark.read.reader import FilterSeeingReader, TieredStoreReader
from tieredstore.spark.read.selection import selection_from_options
from tieredstore.spark.read.source import Source
from tieredstore.spark.read.stream import STREAM_OPTIONS, TieredStoreStreamReader, stream_options


class TieredStoreDataSource(Source):
    """Short name ``tieredstore``. Options: see :mod:`tieredstore.spark`."""

    format_name, columns = FORMAT_NAME, SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("tieredstore")``: see :mod:`tieredstore.spark.read.stream`."""
        options = lower_options(dict(self.options))
        streaming = stream_options(options)
        config = self.store_config(options, skip=SELECTION_OPTIONS | STREAM_OPTIONS)
        selection = selection_from_options(options)
        reader = TieredStoreReader(
            config, selection,
            messages_per_partition=int_option(options, "messages_per_partition", 0),
            batch_rows=int_option(options, "batch_rows", BATCH_ROWS, lo=1))
        return TieredStoreStreamReader(config, selection, reader=reader, **streaming)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = lower_options(dict(self.options))
        config, selection = self.store_config(options), selection_from_options(options)
        per_partition = int_option(options, "messages_per_partition", 0)
        batch_rows = int_option(options, "batch_rows", BATCH_ROWS, lo=1)
        if options.get("pushdown", "false").lower() not in ("false", "0", "no", "off"):
            raise ConfigError("pushdown", "Spark filter pushdown is not supported: PySpark "
                              "hands one scan's pushed read plan to the other scans of the "
                              "same DataFrame (see tieredstore.spark.read.pushdown); select with "
                              "the options topic, queue_id, offset_from, offset_to, "
                              "time_from, time_to instead")
        kind = FilterSeeingReader if in_pushdown_planning() else TieredStoreReader
        return kind(config, selection, messages_per_partition=per_partition,
                    batch_rows=batch_rows)
