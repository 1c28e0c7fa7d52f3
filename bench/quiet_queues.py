"""Quiet queues: what 1,000 queues at 1 message/s of 1 KiB each cost an hour.

Each write mode runs the same producer in real time on the in-memory store
(its chokepoint counts every request the S3 backend would make, so the counts
do not depend on the machine): one message to each queue every second, spread
evenly, the shipped configuration otherwise. After a warm-up (queue creation)
the requests of ``quiet_seconds`` of steady state are counted and scaled to an
hour. Then, the producer going on, a flush every half second is timed (each
covers every queue; their requests are not in the counts).

The log mode's compaction runs at ``log_compact_age`` (an hour by default),
longer than the run: a compaction pass is then forced on a clock moved on by
that age (``AsyncMessageStore.compact_log(now)``), which moves every queue's
log bytes into chunks and deletes the log objects they leave. An hour at
steady state costs one such pass: its chunk PUTs (two per queue, one per file)
once, and its GETs and deletes scaled from the run's data to an hour's. The
pass reads what the fetcher's memory no longer holds; over an hour it holds
``memory_cache_bytes`` of an hour's data, so the log run's memory is that
share of the run's data (scaled down as the rest).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from bench.common import DEFAULTS, BenchEnv, Table
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.store import AsyncMessageStore

HOUR = 3600.0
PUT_CLASS = ("put", "create_multipart", "upload_part", "upload_part_copy",
             "complete_multipart", "list", "list_uploads")
GET_CLASS = ("get", "head")
MESSAGE = 1024
GOAL_PUTS = 20_000
GOAL_GETS = 5_000


@dataclass
class QuietRun:
    mode: str
    seconds: float
    messages: int
    steady: Counter[str]  # requests in the measured window
    compaction: Counter[str] = field(default_factory=Counter)  # the forced pass
    flushes: list[float] = field(default_factory=list)

    def per_hour(self, ops: tuple[str, ...]) -> int:
        steady = sum(self.steady[op] for op in ops) * HOUR / self.seconds
        return round(steady + self.compaction_per_hour(ops))

    def compaction_per_hour(self, ops: tuple[str, ...]) -> float:
        """Chunk PUTs once an hour; what scales with the bytes (GETs, deletes) scaled."""
        total = 0.0
        for op in ops:
            n = self.compaction[op]
            total += n if op == "put" else n * HOUR / self.seconds
        return total


async def produce(store: AsyncMessageStore, queues: int, seconds: float,
                  body: bytes) -> int:
    """One message a second to each queue, spread evenly over the second."""
    sent = 0
    start = time.monotonic()
    step = 0.01
    per_step = max(1, round(queues * step))
    q = 0
    while time.monotonic() - start < seconds:
        for _ in range(per_step):
            await store.append("quiet", q, body)
            q = (q + 1) % queues
            sent += 1
        next_at = start + (sent / queues)
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    return sent


async def time_flushes(store: AsyncMessageStore, until: asyncio.Event,
                       into: list[float]) -> None:
    while not until.is_set():
        await asyncio.sleep(0.5)
        started = time.perf_counter()
        await store.flush()
        into.append(time.perf_counter() - started)


def flush_seconds(seconds: float) -> float:
    return min(10.0, max(2.0, seconds / 3))


async def measure(mode: str, queues: int, seconds: float) -> QuietRun:
    backend = MemoryObjectStore()
    produced = (seconds / 4 + seconds + flush_seconds(seconds)) * queues * MESSAGE
    hour = HOUR * queues * MESSAGE
    memory = max(64 * 1024, int(DEFAULTS.memory_cache_bytes * produced / hour))
    config = DEFAULTS.replace(backend="memory", write_mode=mode, gc_interval=0.0,
                              retention_interval=0.0, memory_cache_bytes=memory)
    store = await AsyncMessageStore.open(config, store=backend)
    body = b"q" * MESSAGE
    try:
        await produce(store, queues, max(1.0, seconds / 4), body)  # warm-up: queues created
        backend.metrics.reset()
        messages = await produce(store, queues, seconds, body)
        run = QuietRun(mode, seconds, messages, Counter(backend.metrics.requests))
        done = asyncio.Event()
        timer = asyncio.create_task(time_flushes(store, done, run.flushes))
        await produce(store, queues, flush_seconds(seconds), body)
        done.set()
        await timer
        if mode == "log":
            await store.flush()
            backend.metrics.reset()
            later = time.time() + max(config.log_compact_age, config.gc_safety_age) + 1
            await store.compact_log(later)
            run.compaction = Counter(backend.metrics.requests)
        return run
    finally:
        await store.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def run(env: BenchEnv) -> list[Table]:
    queues, seconds = env.sizes.quiet_queues, env.sizes.quiet_seconds
    interval = DEFAULTS.group_commit_interval
    table = Table(
        f"Quiet queues: {queues} queues at 1 message/s of {MESSAGE} B, requests per hour "
        f"(in-memory store, {seconds:.0f} s of steady state scaled)",
        ["write mode", "messages/s", "PUT-class/hour", "GET-class/hour", "deletes/hour",
         "compaction PUTs/hour", "flush p50 / p99 ms"],
        goal=f"log mode: at most {GOAL_PUTS:,} PUT-class and {GOAL_GETS:,} GET-class "
             "requests an hour, compaction included")
    runs = [await measure(mode, queues, seconds) for mode in ("direct", "log")]
    for r in runs:
        table.add(r.mode, f"{r.messages / r.seconds:.0f}", f"{r.per_hour(PUT_CLASS):,}",
                  f"{r.per_hour(GET_CLASS):,}", f"{r.per_hour(('delete',)):,}",
                  f"{round(r.compaction_per_hour(('put',))):,}",
                  f"{percentile(r.flushes, 0.5) * 1000:.0f} / "
                  f"{percentile(r.flushes, 0.99) * 1000:.0f}")
    log_run = runs[-1]
    table.verdict(log_run.per_hour(PUT_CLASS) <= GOAL_PUTS,
                  f"log mode PUT-class {log_run.per_hour(PUT_CLASS):,}/hour")
    table.verdict(log_run.per_hour(GET_CLASS) <= GOAL_GETS,
                  f"log mode GET-class {log_run.per_hour(GET_CLASS):,}/hour")
    table.notes.append(
        f"group_commit_interval {interval} s; log_compact_age {DEFAULTS.log_compact_age:.0f} s "
        "(its pass forced at the end: chunk PUTs counted once an hour, GETs and deletes "
        "scaled); a flush covers every queue")
    table.notes.append(
        "memory_cache_bytes scaled to the run: the run's share of an hour's data, as "
        f"{DEFAULTS.memory_cache_bytes // 2**20} MiB is of an hour's. Compaction GETs are "
        "one ranged GET per log piece the fetcher no longer holds: consolidation (not yet "
        "built) is what brings them under the goal")
    return [table]
