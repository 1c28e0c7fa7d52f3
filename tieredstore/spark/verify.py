"""Verify a store: one Spark task per queue runs the store's own
:func:`tieredstore.store.verify_queue` (every message read back, every CRC
checked, offsets continuous) and the driver renders one row per queue, the
same findings ``tieredstore verify`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.spark.options import on_store
from tieredstore.spark.stats import QueueTask
from tieredstore.store import NoSuchQueue, planned_log, verify_queue


@dataclass(frozen=True, slots=True)
class QueueReport:
    """One queue's verdict (a row of the verify table)."""

    broker: str
    topic: str
    queue_id: int
    segments: int  # as QueueSummary.segments counts them
    messages: int
    first_offset: int
    next_offset: int
    ok: bool
    problems: tuple[str, ...]


def verify_task(settings: TieredStoreConfig, queue: QueueTask) -> QueueReport | None:
    """Verify one queue (None: it has no metadata), its log pieces as the driver
    loaded them. Runs in a task, on an event loop and a store of its own."""
    broker, topic, queue_id = queue.broker, queue.topic, queue.queue_id
    log = planned_log(topic, queue_id, queue.pieces)
    settings = settings.replace(broker=broker)
    try:
        c = on_store(settings, lambda store: verify_queue(store, settings, topic, queue_id,
                                                          log=log))
    except NoSuchQueue:
        return None
    except (TieredStoreError, OSError) as exc:
        return QueueReport(broker, topic, queue_id, 0, 0, 0, 0, False,
                           (f"{broker}/{topic}/{queue_id}: {type(exc).__name__}: {exc}",))
    return QueueReport(broker, topic, queue_id, c.segments, c.records,
                       c.min_offset, c.max_offset + c.undispatched, not c.error_count,
                       tuple(c.errors))
