"""Compacting a backlog of log objects, one Spark task per broker.

In write mode ``log`` each broker's store moves its log objects' pieces into
chunks of their segments by itself, in the background. A broker that was down
for long, or a bucket imported from elsewhere, can hold a backlog. This job
runs, for each broker named, the very code the store runs embedded: a task
opens the broker's ``AsyncMessageStore`` (recovering it, which claims its log
and its queues: **it fences that broker's live writer, so run it with the
brokers stopped**), compacts every piece into chunks with ``compact_log`` as if
``log_compact_age`` had passed, deletes the log objects left without a piece
(readers that listed them relist), and closes it. Brokers run in parallel.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.store import AsyncMessageStore, log_path, open_object_store

LOGS_SCHEMA = ("broker string, log_objects_before int, log_objects_after int, "
               "log_bytes_before long, log_bytes_after long, queues int, seconds double, "
               "error string")


@dataclass(frozen=True, slots=True)
class LogCompaction:
    """What one broker's task did (a row of ``LOGS_SCHEMA``)."""

    broker: str
    log_objects_before: int
    log_objects_after: int
    log_bytes_before: int
    log_bytes_after: int
    queues: int
    seconds: float
    error: str | None


def compact_broker_log(config: TieredStoreConfig, broker: str) -> LogCompaction:
    """Runs in a task: the broker's store opened, its whole log compacted, closed."""
    settings = dataclasses.replace(config, broker=broker, write_mode="log")
    started = time.perf_counter()

    async def log_size() -> tuple[int, int]:
        async with open_object_store(settings) as store:
            found = [o for o in await store.list_all(log_path(settings).directory) if o.size]
        return len(found), sum(o.size for o in found)

    async def run() -> LogCompaction:
        objects, nbytes = await log_size()
        async with await AsyncMessageStore.open(settings.replace(gc_interval=0.0)) as store:
            queues = len(store.queues())
            await store.compact_log(time.time() + settings.log_compact_age + 1)
        after, after_bytes = await log_size()
        return LogCompaction(broker, objects, after, nbytes, after_bytes, queues,
                             time.perf_counter() - started, None)

    try:
        return sync.run(run())
    except (TieredStoreError, OSError) as exc:
        return LogCompaction(broker, 0, 0, 0, 0, 0, time.perf_counter() - started,
                             f"{type(exc).__name__}: {exc}")
