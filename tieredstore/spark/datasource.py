"""``spark.read.format("tieredstore")``: a PySpark 4 Python DataSource over a store.

One input partition per sealed consume-queue segment (optionally split, see
``messages_per_partition``), plus one per queue for its active tail. The
reader options ``topic``, ``queue_id``, ``offset_from``/``offset_to`` and
``time_from``/``time_to`` choose segments from metadata alone, before any data
is read, and select rows exactly.

Spark's own filters (``df.where(...)``) are applied to the rows but not pushed
into the read: PySpark (4.1 to 4.3 at least) hands one scan's pushed read plan
to the other scans of the same DataFrame, so no reader can plan from a query's
own filters (:mod:`tieredstore.spark.pushdown` has how, and the reproduction).
The plan depends on the reader options alone, the same for every query over
the DataFrame. With ``spark.sql.python.filterPushdown.enabled`` on, the reader
sees the filters, returns them all to Spark and logs which reader options
would have selected the same segments.

Rows come out as Arrow record batches. The store's config is resolved on the
driver and travels with the reader; each task opens its own store, fetcher
and event loop, and reads strictly read-only (it never claims a queue or
writes an object).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.spark.options import (
    FORMAT_NAME,
    config_from_options,
    int_option,
    lower_options,
    on_store,
)
from tieredstore.spark.plan import NO_END, SegmentSlice, plan_read
from tieredstore.spark.pushdown import in_pushdown_planning, unpushed_warning
from tieredstore.spark.selection import Selection, selection_from_options
from tieredstore.store import UNIT_SIZE, Batch, Message, ObjectStore, scan_planned

ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), False),
    pa.field("queue_id", pa.int32(), False),
    pa.field("offset", pa.int64(), False),
    pa.field("store_timestamp", pa.timestamp("us", tz="UTC"), False),
    pa.field("keys", pa.list_(pa.field("element", pa.string(), False)), False),
    pa.field("tags", pa.string(), True),
    pa.field("properties", pa.map_(pa.string(), pa.field("value", pa.string(), False)), False),
    pa.field("body", pa.binary(), False),
])
SCHEMA = from_arrow_schema(ARROW_SCHEMA)  # the same columns as Spark types

log = logging.getLogger(__name__)

BATCH_ROWS = 8192
BATCH_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Planned(InputPartition):
    """One input partition: one planned slice (plain values, pickled to executors)."""

    slice: Any


class PlannedReader(DataSourceReader):
    """Plans slices on the driver, on a store of its own (:meth:`plan`), one input
    partition each; reads one slice per task (:meth:`batches`)."""

    def __init__(self, config: TieredStoreConfig) -> None:
        self.config = config

    async def plan(self, store: ObjectStore) -> Sequence[Any]:
        raise NotImplementedError

    def batches(self, part: Any) -> Iterator[Any]:
        """The slice's rows as Arrow record batches."""
        raise NotImplementedError

    def partitions(self) -> list[InputPartition]:
        return [Planned(s) for s in on_store(self.config, self.plan)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, Planned):
            return iter(())  # Spark's placeholder when there is nothing to read
        return self.batches(partition.slice)


class Source(DataSource):
    """A format of short name :attr:`format_name` and schema :attr:`columns`."""

    format_name: ClassVar[str]
    columns: ClassVar[StructType]

    @classmethod
    def name(cls) -> str:
        return cls.format_name

    def schema(self) -> StructType:
        return self.columns


def to_record_batch(messages: Sequence[Message]) -> Any:
    """Messages as one Arrow record batch of :data:`ARROW_SCHEMA`."""
    columns = [
        [m.topic for m in messages],
        [m.queue_id for m in messages],
        [m.offset for m in messages],
        [m.store_timestamp * 1000 for m in messages],
        [list(m.keys) for m in messages],
        [m.tags for m in messages],
        [list(m.properties.items()) for m in messages],
        [m.body for m in messages],
    ]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, ARROW_SCHEMA, strict=True)],
        schema=ARROW_SCHEMA)


class TieredStoreReader(PlannedReader):
    """One slice of a queue (:class:`SegmentSlice`) per task."""

    def __init__(self, config: TieredStoreConfig, selection: Selection, *,
                 messages_per_partition: int = 0, batch_rows: int = BATCH_ROWS) -> None:
        super().__init__(config)
        self.selection = selection
        self.messages_per_partition = messages_per_partition
        self.batch_rows = batch_rows

    async def plan(self, store: ObjectStore) -> list[SegmentSlice]:
        return await plan_read(store, self.config, self.selection,
                               messages_per_slice=self.messages_per_partition)

    def batches(self, part: SegmentSlice) -> Iterator[Any]:
        config, wants = self.config, self.selection.wants
        pending: list[Message] = []
        size = 0
        for batch in sync.iterate(lambda: scan_slice(config, part, wants)):
            for message in batch.messages:
                pending.append(message)
                size += len(message.body)
                if len(pending) >= self.batch_rows or size >= BATCH_BYTES:
                    yield to_record_batch(pending)
                    pending, size = [], 0
        if pending:
            yield to_record_batch(pending)


class FilterSeeingReader(TieredStoreReader):
    """The reader of PySpark's filter-pushdown planning: pushes no filter, keeps
    nothing of them (the plan is the options' alone), warns when they could prune."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        warning = unpushed_warning(self.selection, filters)
        if warning is not None:
            log.warning("%s", warning)
        return filters  # every one still applied by Spark


def scan_slice(config: TieredStoreConfig, part: SegmentSlice,
               wants: Callable[[int, int], bool] | None = None, *,
               on: tuple[ObjectStore, Any] | None = None) -> AsyncIterator[Batch]:
    """Strictly scan one planned slice with the store's queue scan, on ``on`` (a
    store and a reader) or a store and fetcher of its own: from its first offset
    (in its consume-queue segment) through its last (or the end of the queue)."""
    first = max(part.first_offset, part.cq_base // UNIT_SIZE)
    end = None if part.last_offset == NO_END else part.last_offset + 1
    return scan_planned(config, part.topic, part.queue_id, first=first, end=end,
                        cq_segments=((part.cq_base, part.cq_size),),
                        cl_segments=part.cl_segments, log_pieces=part.log_pieces,
                        wants=wants, on=on)


class TieredStoreDataSource(Source):
    """Short name ``tieredstore``. Options: see :mod:`tieredstore.spark`."""

    format_name, columns = FORMAT_NAME, SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        options = lower_options(dict(self.options))
        config, selection = config_from_options(options), selection_from_options(options)
        per_partition = int_option(options, "messages_per_partition", 0)
        batch_rows = int_option(options, "batch_rows", BATCH_ROWS, lo=1)
        if options.get("pushdown", "false").lower() not in ("false", "0", "no", "off"):
            raise ConfigError("pushdown", "Spark filter pushdown is not supported: PySpark "
                              "hands one scan's pushed read plan to the other scans of the "
                              "same DataFrame (see tieredstore.spark.pushdown); select with "
                              "the options topic, queue_id, offset_from, offset_to, "
                              "time_from, time_to instead")
        kind = FilterSeeingReader if in_pushdown_planning() else TieredStoreReader
        return kind(config, selection, messages_per_partition=per_partition,
                    batch_rows=batch_rows)
