"""Stats of a store: one row per queue, one Spark task per queue.

The driver finds the selected queues (of every broker selected) and loads each
broker's log once; each
task gets its queue's log pieces (plain values) and sums up the queue as
``tieredstore inspect`` does (:func:`tieredstore.store.summarize`), with the
store timestamps of its first and last message. A queue that cannot be read
gets a row with the error and nulls.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.spark.options import on_store
from tieredstore.store import LogPiece, planned_log, summarize

STATS_SCHEMA = ("broker string, topic string, queue_id int, messages long, min_offset long, "
                "max_offset long, commitlog_bytes long, consumequeue_bytes long, index_bytes long, "
                "segments int, chunks int, "
                "unmerged_segments int, oldest timestamp, newest timestamp, error string")


@dataclass(frozen=True, slots=True)
class QueueTask:
    """One queue of a broker, and the pieces the driver's load of the broker's log
    found for it."""

    broker: str
    topic: str
    queue_id: int
    pieces: tuple[LogPiece, ...]


def queue_stats(settings: TieredStoreConfig, task: QueueTask) -> tuple[object, ...]:
    """A row of ``STATS_SCHEMA``. Runs in a task, on an event loop and a store of its own."""
    log = planned_log(task.topic, task.queue_id, task.pieces)
    settings = settings.replace(broker=task.broker)
    try:
        got = on_store(settings, lambda store: summarize(store, settings, task.topic,
                                                          task.queue_id, log=log))
    except (TieredStoreError, OSError) as exc:
        return (task.broker, task.topic, task.queue_id, *[None] * 11,
                f"{type(exc).__name__}: {exc}")
    files = (got.commit_log, got.consume_queue, got.index)
    return (task.broker, task.topic, task.queue_id, got.messages, got.min_offset, got.max_offset,
            got.commit_log.bytes, got.consume_queue.bytes, got.index.bytes,
            got.segments, sum(f.chunks for f in files),
            sum(f.unmerged for f in files), _time(got.oldest_ms), _time(got.newest_ms), None)


def _time(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
