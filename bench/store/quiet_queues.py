"""Quiet queues: what 1,000 queues at 1 message/s of 1 KiB each cost an hour.

Each write mode runs the same producer in real time on the in-memory store
(its chokepoint counts every request the S3 backend would make, so the counts
do not depend on the machine): one message to each queue every second, spread
evenly, the shipped configuration otherwise. After a warm-up (a message to
each queue, which creates it, then the producer's rate)
the requests of ``quiet_seconds`` of steady state are counted; group commits
happen in real time, so their requests are scaled to an hour.

The log mode's work that follows the data rather than the clock runs as an
hour in miniature: with ``s`` the run's share of an hour of data, the
consolidation interval and size, the compaction group size and the fetcher's
memory are ``s`` times the shipped ones, so the run makes as many
consolidated objects and compaction groups as an hour does. Consolidations
are counted as one hour makes them (one per ``log_consolidate_interval``).
Then one compaction pass is forced on a clock moved on by ``log_compact_age``
(``AsyncMessageStore.compact_log(now)``): what an hour's data costs to move
into chunks once (two chunk PUTs per queue, one ranged GET per consolidated
object per group of queues) is counted as it is.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from bench.common import DEFAULTS, BenchEnv, Table
from tieredstore.objectstore import GET_CLASS, PUT_CLASS, MemoryObjectStore
from tieredstore.store import AsyncMessageStore

HOUR = 3600.0
MESSAGE = 1024
GOAL_PUTS = 20_000
GOAL_GETS = 5_000


@dataclass
class QuietRun:
    mode: str
    seconds: float
    messages: int
    steady: Counter[str]  # requests in the measured window, scaled to an hour below
    consolidations: int = 0  # in the window (PUTs, among the steady ones)
    scale: float = 1.0  # the run's share of an hour of data
    compaction: Counter[str] = field(default_factory=Counter)  # the forced pass: as is
    flushes: list[float] = field(default_factory=list)

    def per_hour(self, ops: Collection[str]) -> int:
        steady = sum(self.steady[op] for op in ops)
        if "put" in ops:  # consolidations: an hour's, not the miniature's rate
            steady -= self.consolidations
        hourly = steady * HOUR / self.seconds + sum(self.compaction[op] for op in ops)
        if "put" in ops and self.mode == "log":
            hourly += HOUR / DEFAULTS.log_consolidate_interval
        return round(hourly)


async def produce(store: AsyncMessageStore, queues: int, seconds: float,
                  body: bytes, rate: float | None = None) -> int:
    """``rate`` messages a second (default one to each queue), to the queues in
    turn, spread evenly over the second."""
    rate = rate or queues
    sent = 0
    start = time.monotonic()
    per_step = max(1, round(rate * 0.01))
    q = 0
    while time.monotonic() - start < seconds:
        for _ in range(per_step):
            await store.append("quiet", q, body)
            q = (q + 1) % queues
            sent += 1
        await asyncio.sleep(max(0.0, start + sent / rate - time.monotonic()))
    return sent


async def time_flushes(store: AsyncMessageStore, until: asyncio.Event,
                       into: list[float]) -> None:
    while not until.is_set():
        await asyncio.sleep(0.5)
        started = time.perf_counter()
        await store.flush()
        into.append(time.perf_counter() - started)


def phases(seconds: float) -> tuple[float, float]:
    """Warm-up and flush-timing seconds around the measured window."""
    return max(1.0, seconds / 4), min(10.0, max(2.0, seconds / 3))


async def measure(mode: str, queues: int, seconds: float, rate: float | None = None
                  ) -> QuietRun:
    backend = MemoryObjectStore()
    warm, flushing = phases(seconds)
    created = queues / (rate or queues)  # the creating messages, in seconds of data
    scale = (created + warm + seconds + flushing) / HOUR
    config = DEFAULTS.replace(
        backend="memory", write_mode=mode, gc_interval=0.0, retention_interval=0.0,
        memory_cache_bytes=max(64 * 1024, int(DEFAULTS.memory_cache_bytes * scale)),
        log_consolidate_interval=DEFAULTS.log_consolidate_interval * scale,
        log_consolidate_bytes=max(1024, int(DEFAULTS.log_consolidate_bytes * scale)),
        log_compact_bytes=max(1024, int(DEFAULTS.log_compact_bytes * scale)))
    store = await AsyncMessageStore.open(config, store=backend)
    body = b"q" * MESSAGE
    try:
        for q in range(queues):  # every queue created (its claim) before the window
            await store.append("quiet", q, body)
        await produce(store, queues, warm, body, rate)
        backend.metrics.reset()
        before = store.snapshot()["log"].get("consolidations", 0)
        messages = await produce(store, queues, seconds, body, rate)
        run = QuietRun(mode, seconds, messages, Counter(backend.metrics.requests),
                       consolidations=store.snapshot()["log"].get("consolidations", 0) - before,
                       scale=scale)
        done = asyncio.Event()
        timer = asyncio.create_task(time_flushes(store, done, run.flushes))
        await produce(store, queues, flushing, body, rate)
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
    table = Table(
        f"Quiet queues: {queues} queues at 1 message/s of {MESSAGE} B, requests per hour "
        f"(in-memory store, {seconds:.0f} s of steady state)",
        ["write mode", "messages/s", "PUT-class/hour", "GET-class/hour", "deletes/hour",
         "compaction PUTs / GETs per hour", "flush p50 / p99 ms"],
        goal=f"log mode: at most {GOAL_PUTS:,} PUT-class and {GOAL_GETS:,} GET-class "
             "requests an hour, compaction included")
    runs = [await measure(mode, queues, seconds) for mode in ("direct", "log")]
    for r in runs:
        table.add(r.mode, f"{r.messages / r.seconds:.0f}", f"{r.per_hour(PUT_CLASS):,}",
                  f"{r.per_hour(GET_CLASS):,}", f"{r.per_hour(('delete',)):,}",
                  f"{r.compaction['put']:,} / {r.compaction['get']:,}",
                  f"{percentile(r.flushes, 0.5) * 1000:.0f} / "
                  f"{percentile(r.flushes, 0.99) * 1000:.0f}")
    log_run = runs[-1]
    table.verdict(log_run.per_hour(PUT_CLASS) <= GOAL_PUTS,
                  f"log mode PUT-class {log_run.per_hour(PUT_CLASS):,}/hour")
    table.verdict(log_run.per_hour(GET_CLASS) <= GOAL_GETS,
                  f"log mode GET-class {log_run.per_hour(GET_CLASS):,}/hour")
    table.notes.append(
        f"group_commit_interval {DEFAULTS.group_commit_interval} s (real time, scaled to an "
        f"hour); consolidation every {DEFAULTS.log_consolidate_interval:.0f} s and "
        f"compaction at {DEFAULTS.log_compact_age:.0f} s as an hour in miniature "
        f"(run's share of an hour: {log_run.scale:.3%}); a flush covers every queue")
    return [table, await bill(env)]


BILL_GOAL_QUEUES = 100_000
BILL_GOAL_PUTS = 20_000


async def bill(env: BenchEnv) -> Table:
    """The hourly bill of many quiet queues (log mode), extrapolated to
    :data:`BILL_GOAL_QUEUES` at the same total message rate: the group commits
    and consolidations follow the rate, not the queues; the hourly move of each
    queue's log bytes into chunks of its segment (the forced compaction pass)
    follows the queues that had a message in the hour: every one of them, at
    these rates."""
    queues, rate = env.sizes.bill_queues, env.sizes.bill_rate
    seconds = env.sizes.quiet_seconds
    run = await measure("log", queues, seconds, rate)
    moved = sum(run.compaction[op] for op in PUT_CLASS)
    steady = run.per_hour(PUT_CLASS) - moved
    factor = BILL_GOAL_QUEUES / queues
    projected = round(steady + moved * factor)
    table = Table(
        f"The hourly bill of {queues:,} quiet queues ({rate:,.0f} messages/s of {MESSAGE} B "
        f"in all), extrapolated to {BILL_GOAL_QUEUES:,} at the same rate "
        f"(in-memory store, {seconds:.0f} s of steady state, log mode)",
        ["queues", "messages/s per queue", "group commits + consolidation PUT-class/hour",
         "hourly move PUT-class (per queue)", "PUT-class/hour"],
        goal=f"at most {BILL_GOAL_PUTS:,} PUT-class an hour for {BILL_GOAL_QUEUES:,} quiet "
             "queues")
    table.add(f"{queues:,} (measured)", f"{rate / queues:.3f}", f"{steady:,}",
              f"{moved:,} ({moved / queues:.2f})", f"{steady + moved:,}")
    table.add(f"{BILL_GOAL_QUEUES:,} (extrapolated)", f"{rate / BILL_GOAL_QUEUES:.4f}",
              f"{steady:,}", f"{round(moved * factor):,} ({moved / queues:.2f})",
              f"{projected:,}")
    table.verdict(projected <= BILL_GOAL_PUTS,
                  f"{BILL_GOAL_QUEUES:,} quiet queues: {projected:,} PUT-class/hour")
    table.notes.append(
        "the hourly move is one compaction pass forced on a clock moved on by "
        f"log_compact_age ({DEFAULTS.log_compact_age:.0f} s), counted as it is: an hour's; "
        "the rest is real time scaled to an hour, as in the table above")
    return table
