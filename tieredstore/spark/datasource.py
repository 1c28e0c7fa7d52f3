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
own filters (:mod:`tieredstore.spark.pushdown` has how, and the reproduction).
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
format carries: :mod:`tieredstore.spark.bound`) and travels with the reader
to the executors; a broker, topic or queue id the cluster does not list is an error
naming it (:func:`~tieredstore.spark.plan.find_queues`). Each task opens its own
store, fetcher and event loop, and reads strictly read-only (it never claims
a queue or writes an object).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.spark.options import (
    FORMAT_NAME,
    READER_OPTIONS,
    SELECTION_OPTIONS,
    check_known,
    config_from_options,
    int_option,
    lower_options,
    on_store,
)
from tieredstore.spark.plan import NO_END, SegmentSlice, plan_read
from tieredstore.spark.pushdown import in_pushdown_planning, unpushed_warning
from tieredstore.spark.selection import Selection, selection_from_options
from tieredstore.store import UNIT_SIZE, Batch, BodyRun, Columns, ObjectStore, scan_planned

ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), False),
    pa.field("broker", pa.string(), False),
    pa.field("queue_id", pa.int32(), False),
    pa.field("offset", pa.int64(), False),
    pa.field("store_timestamp", pa.timestamp("us", tz="UTC"), False),
    pa.field("keys", pa.list_(pa.field("element", pa.string(), False)), False),
    pa.field("tags", pa.string(), True),
    pa.field("properties", pa.map_(pa.string(), pa.field("value", pa.string(), False)), False),
    pa.field("body", pa.binary(), False),
])
SCHEMA = from_arrow_schema(ARROW_SCHEMA)  # the same columns as Spark types
_KEYS, _PROPERTIES = ARROW_SCHEMA.field("keys").type, ARROW_SCHEMA.field("properties").type
_MICROS = ARROW_SCHEMA.field("store_timestamp").type

log = logging.getLogger(__name__)

BATCH_ROWS = 8192
BATCH_BYTES = 16 * 1024 * 1024  # of bodies per record batch (at most 2 GiB: 32-bit offsets)
_GATHER = 16  # a run of a 16th of a batch's rows or bytes makes a batch alone
_INT32_MAX = 2**31 - 1  # binary_slice's end: to each body's end (its default fails, 26.0)


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
    """A format of short name :attr:`format_name` and schema :attr:`columns`; its
    store named by the options, or :attr:`bound` (see :mod:`tieredstore.spark.bound`)."""

    format_name: ClassVar[str]
    columns: ClassVar[StructType]
    # The configuration a format bound on the driver reads (pickled with the class).
    bound: ClassVar[TieredStoreConfig | None] = None

    @classmethod
    def name(cls) -> str:
        return cls.format_name

    def schema(self) -> StructType:
        return self.columns

    def store_config(self, options: Mapping[str, str], *,
                     skip: frozenset[str] = SELECTION_OPTIONS) -> TieredStoreConfig:
        """The store to read: :attr:`bound`, or the one the options (of which
        ``skip`` are the reader's own) name. A bound format takes no store option."""
        if self.bound is None:
            return config_from_options(options, skip=skip)
        check_known(options, skip)
        named = sorted(k for k in options
                       if k == "config" or (k not in skip and k not in READER_OPTIONS))
        if named:
            raise ConfigError(named[0], f"format {self.name()!r} reads the store it was "
                              "bound to (tieredstore.spark.bind): give it no store options")
        return self.bound


def to_record_batches(columns: Columns, broker: str, max_rows: int = BATCH_ROWS
                      ) -> Iterator[Any]:
    """Columns (of a queue of ``broker``) as Arrow record batches of
    :data:`ARROW_SCHEMA`, each of at most ``max_rows`` rows and
    :data:`BATCH_BYTES` of bodies (or one body). Built in C: the bodies cut out
    of the bytes read (one copy, by Arrow), the offsets and store times from
    their arrays, the topic, broker, queue and empty keys, tags and properties
    as constant arrays."""
    offsets, stamps = columns.offsets(), columns.timestamps()
    row = 0
    for pieces in _batches(columns.runs(), max_rows):
        bodies = [_bodies(run, lo, hi) for run, lo, hi in pieces]
        n = sum(map(len, bodies))
        body = bodies[0] if len(bodies) == 1 else pa.concat_arrays(bodies)
        yield _record_batch(columns, broker, body, offsets[row : row + n],
                            stamps[row : row + n], i=row)
        row += n


def _batches(runs: Sequence[BodyRun], max_rows: int) -> Iterator[list[tuple[BodyRun, int, int]]]:
    """The rows of ``runs`` as batches of pieces ``(run, lo, hi)``: a run of
    many rows or bytes alone (cut to the bounds of a batch), small ones
    gathered (their bodies joined: a copy)."""
    group: list[tuple[BodyRun, int, int]] = []
    rows = size = 0
    for run in runs:
        lo, n = 0, len(run)
        # The bytes of the bodies up to the end of each row.
        ends = run.at[1:] - run.at[0] - run.skip * np.arange(1, n + 1)
        while lo < n:
            before = int(ends[lo - 1]) if lo else 0
            hi = min(n, lo + max_rows,
                     max(lo + 1, int(np.searchsorted(ends, before + BATCH_BYTES, "right"))))
            bytes_ = int(ends[hi - 1]) - before
            big = hi - lo >= max_rows // _GATHER or bytes_ >= BATCH_BYTES // _GATHER
            if group and (big or rows + hi - lo > max_rows or size + bytes_ > BATCH_BYTES):
                yield group
                group, rows, size = [], 0, 0
            group.append((run, lo, hi))
            rows, size = rows + hi - lo, size + bytes_
            if big:
                yield group
                group, rows, size = [], 0, 0
            lo = hi
    if group:
        yield group


def _bodies(run: BodyRun, lo: int, hi: int) -> Any:
    """Bodies ``[lo, hi)`` of ``run`` as an Arrow binary array: offsets into the
    bytes read, then each body cut out of its record (Arrow copies them once)."""
    at = run.at[lo : hi + 1]
    base = int(at[0])
    data = pa.py_buffer(run.data)[base : int(at[-1])]
    offsets = pa.py_buffer((at - base).astype(np.int32))
    whole = pa.Array.from_buffers(pa.binary(), hi - lo, [None, offsets, data])
    return pc.binary_slice(whole, run.skip, _INT32_MAX) if run.skip else whole


def _record_batch(columns: Columns, broker: str, body: Any, offsets: Any, stamps: Any, *,
                  i: int) -> Any:
    """Rows ``[i, i + len(body))`` of ``columns``: their bodies, offsets and store times."""
    n = len(body)
    j = i + n
    topic, broker_, queue, no_keys, no_tags, no_properties = _constants(
        columns.topic, broker, columns.queue_id, n)
    keys, tags, properties = columns.keys, columns.tags, columns.properties
    arrays = [
        topic, broker_, queue,
        pa.array(offsets, pa.int64()),
        pa.array(stamps * 1000, _MICROS),  # milliseconds as Spark's microseconds
        no_keys if keys is None else pa.array([list(k) for k in keys[i:j]], _KEYS),
        no_tags if tags is None else pa.array(tags[i:j], pa.string()),
        no_properties if properties is None
        else pa.array([list(p.items()) for p in properties[i:j]], _PROPERTIES),
        body,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


@lru_cache(maxsize=16)
def _constants(topic: str, broker: str, queue_id: int, n: int) -> tuple[Any, ...]:
    """The columns of ``n`` rows of one queue that do not vary (Arrow arrays are
    immutable, so batches of one size share them): its topic, broker and queue,
    no keys, no tags, no properties."""
    none = pa.repeat(pa.scalar(0, pa.int32()), n + 1)  # offsets of n empty lists
    empty = pa.array([], pa.string())
    return (pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(broker, pa.string()), n),
            pa.repeat(pa.scalar(queue_id, pa.int32()), n),
            pa.ListArray.from_arrays(none, empty, type=_KEYS), pa.nulls(n, pa.string()),
            pa.MapArray.from_arrays(none, empty, empty, type=_PROPERTIES))


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
        config, wants = self.config, self.selection.row_filter
        _freeze_once()
        for batch in sync.iterate(lambda: scan_slice(config, part, wants), ahead=1):
            assert batch.columns is not None
            yield from to_record_batches(batch.columns, part.broker, self.batch_rows)


_frozen = False  # whether this process froze its objects (:func:`_freeze_once`)


def _freeze_once() -> None:
    """Once per process, at its first read: move every object alive so far out of
    the garbage collector's reach (``gc.freeze``). Spark's Python worker
    collects garbage after each task; without this each collection walks
    every module the worker imported (PySpark's, Arrow's, this library's),
    some 80,000 objects, in every task."""
    global _frozen  # noqa: PLW0603
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


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
    """Strictly scan one planned slice (of its broker) with the store's queue scan, on ``on`` (a
    store and a reader) or a store and fetcher of its own: from its first offset
    (in its consume-queue segment) through its last (or the end of the queue);
    its batches in columns (see ``scan_planned``)."""
    first = max(part.first_offset, part.cq_base // UNIT_SIZE)
    end = None if part.last_offset == NO_END else part.last_offset + 1
    if part.broker != config.broker:
        config = config.replace(broker=part.broker)
    return scan_planned(config, part.topic, part.queue_id, first=first, end=end,
                        cq_segments=((part.cq_base, part.cq_size),),
                        cl_segments=part.cl_segments, log_pieces=part.log_pieces,
                        wants=wants, on=on, clean_from=part.clean_from,
                        whole=part.whole)


class TieredStoreDataSource(Source):
    """Short name ``tieredstore``. Options: see :mod:`tieredstore.spark`."""

    format_name, columns = FORMAT_NAME, SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("tieredstore")``: see :mod:`tieredstore.spark.stream`."""
        from tieredstore.spark.stream import (  # here: it imports this module
            STREAM_OPTIONS,
            TieredStoreStreamReader,
            stream_options,
        )

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
                              "same DataFrame (see tieredstore.spark.pushdown); select with "
                              "the options topic, queue_id, offset_from, offset_to, "
                              "time_from, time_to instead")
        kind = FilterSeeingReader if in_pushdown_planning() else TieredStoreReader
        return kind(config, selection, messages_per_partition=per_partition,
                    batch_rows=batch_rows)
