"""The batch reader of ``spark.read.format("tieredstore")``: one planned slice
of a queue per task, scanned strictly read-only on the task's own store,
fetcher and event loop, one block ahead of Spark (``sync.iterate(ahead=1)``);
the stream reader (:mod:`tieredstore.spark.read.stream`) reads its offset
ranges with it.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from pyspark.sql.datasource import Filter

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.spark.read.batches import BATCH_ROWS, to_record_batches
from tieredstore.spark.read.plan import NO_END, SegmentSlice, plan_read
from tieredstore.spark.read.pushdown import unpushed_warning
from tieredstore.spark.read.selection import Selection
from tieredstore.spark.read.source import PlannedReader
from tieredstore.store import UNIT_SIZE, Batch, ObjectStore, scan_planned

log = logging.getLogger(__name__)


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
