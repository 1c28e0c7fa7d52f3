"""Stats of a store: one row per queue, one Spark task per queue.

The driver finds the selected queues and loads the broker's log once; each
task gets its queue's log pieces (plain values) and sums up the queue as
``tieredstore inspect`` does (:func:`tieredstore.store.summarize`), with the
store timestamps of its first and last message. A queue that cannot be read
gets a row with the error and nulls.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tieredstore import sync
from tieredstore.errors import TieredStoreError
from tieredstore.filetype import FileType
from tieredstore.log import LogSnapshot
from tieredstore.segment import DirectReader
from tieredstore.segment.layout import ChunkRef
from tieredstore.spark.options import ConfigValues, config_of
from tieredstore.store import open_object_store, summarize

STATS_SCHEMA = ("topic string, queue_id int, messages long, min_offset long, max_offset long, "
                "commitlog_bytes long, consumequeue_bytes long, index_bytes long, "
                "segments int, chunks int, "
                "unmerged_segments int, oldest timestamp, newest timestamp, error string")


@dataclass(frozen=True, slots=True)
class StatsTask:
    """One queue, and the pieces the driver's load of the log found for it."""

    topic: str
    queue_id: int
    pieces: tuple[tuple[FileType, int, ChunkRef], ...]


def queue_stats(config: ConfigValues, task: StatsTask) -> tuple[object, ...]:
    """A row of ``STATS_SCHEMA``. Runs in a task, on an event loop of its own."""

    async def run() -> tuple[object, ...]:
        settings = config_of(config)
        pieces: dict[tuple[str, int, FileType, int], list[ChunkRef]] = {}
        for f, base, unit in task.pieces:
            pieces.setdefault((task.topic, task.queue_id, f, base), []).append(unit)
        log = LogSnapshot(pieces)
        store = open_object_store(settings)
        try:
            got = await summarize(store, settings, task.topic, task.queue_id,
                                  DirectReader(store), log=log)
        finally:
            await store.close()
        files = (got.commit_log, got.consume_queue, got.index)
        return (task.topic, task.queue_id, got.messages, got.min_offset, got.max_offset,
                got.commit_log.bytes, got.consume_queue.bytes, got.index.bytes,
                sum(f.segments for f in files), sum(f.chunks for f in files),
                sum(f.unmerged for f in files), _time(got.oldest_ms), _time(got.newest_ms), None)

    try:
        return sync.run(run())
    except (TieredStoreError, OSError) as exc:
        return (task.topic, task.queue_id, *[None] * 11, f"{type(exc).__name__}: {exc}")


def _time(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
