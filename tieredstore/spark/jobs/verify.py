"""Verify a store: one Spark task per queue runs the store's own
:func:`tieredstore.store.verify_queue` (every message read back, every CRC
checked, offsets continuous); the driver gathers the tasks'
:class:`~tieredstore.store.QueueCheck` into one
:class:`~tieredstore.store.VerifyReport`, the report ``tieredstore verify``
renders, with the tasks' requests summed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.spark.jobs.stats import QueueTask
from tieredstore.spark.options import on_store
from tieredstore.store import (
    NoSuchQueue,
    ObjectStore,
    QueueCheck,
    VerifyReport,
    planned_log,
    verify_queue,
)


def verify_task(settings: TieredStoreConfig, queue: QueueTask) -> VerifyReport | None:
    """Verify one queue (None: it has no metadata), its log pieces as the driver
    loaded them: a report of that queue and the task's requests. Runs in a
    task, on an event loop and a store of its own."""
    broker, topic, queue_id = queue.broker, queue.topic, queue.queue_id
    log = planned_log(topic, queue_id, queue.pieces)
    settings = settings.replace(broker=broker)

    async def verify(store: ObjectStore) -> VerifyReport:
        check = await verify_queue(store, settings, topic, queue_id, log=log)
        return VerifyReport([check], store.metrics.snapshot())

    try:
        return on_store(settings, verify)
    except NoSuchQueue:
        return None
    except (TieredStoreError, OSError) as exc:
        check = QueueCheck(topic, queue_id, broker=broker)
        check.error(f"{type(exc).__name__}: {exc}")
        return VerifyReport([check], {})


def combine(reports: Iterable[VerifyReport]) -> VerifyReport:
    """One report of the queues of ``reports``, sorted by broker, topic and
    queue, with their requests summed."""
    queues: list[QueueCheck] = []
    requests: Counter[str] = Counter()
    for report in reports:
        queues += report.queues
        requests.update({op: int(n) for op, n in report.requests.get("requests", {}).items()})
    queues.sort(key=lambda c: (c.broker, c.topic, c.queue_id))
    return VerifyReport(queues, {"requests": dict(requests)})
