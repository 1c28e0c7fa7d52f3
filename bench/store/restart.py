"""Restart at scale: how long a broker of many quiet queues takes to open and
serve each queue once, and what its open asks of the bucket.

For each queue count, one broker (the shipped configuration, write mode
``log``) writes 4 messages of 1 KiB to every queue of one topic, flushes and
closes. Then a new store opens the same bucket: ``open`` is timed and its
requests counted by kind (the store's chokepoint counts every request the
backend is sent); then one ``get`` of each queue is timed (the first read
of every queue, 16 at a time), its requests counted apart.

The goal (issue 41): a 4,000-queue broker opened and every queue read once
within 3 s, at most 0.1 requests a queue at open (listing pages included),
and the cost per queue flat (within 1.2x) from the fewest queues to the most.
On SeaweedFS the same case prints requests and seconds, judged by nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from bench.common import DEFAULTS, LOCAL, SEAWEEDFS, BenchEnv, KiB, Table
from bench.store.consume import _KeepOpen
from tieredstore.objectstore import ObjectStore
from tieredstore.store import AsyncMessageStore

TOPIC = "restart"
MESSAGES = 4
MESSAGE = 1 * KiB
READERS = 16
GOAL_QUEUES = 4000
GOAL_SECONDS = 3.0
GOAL_REQUESTS = 0.1  # a queue, at open
GOAL_FLAT = 1.2
COUNTS = {"full": (250, 1000, 4000, 16000), "quick": (250, 1000), "tiny": (8, 32)}


async def fill(store: ObjectStore, queues: int) -> None:
    """``MESSAGES`` messages in each of ``queues`` queues, flushed, the broker closed."""
    writer = await AsyncMessageStore.open(DEFAULTS.replace(gc_interval=0),
                                          store=_KeepOpen(store))
    try:
        body = b"r" * MESSAGE
        for q in range(queues):
            await writer.append_batch(TOPIC, q, [body] * MESSAGES)
        await writer.flush()
    finally:
        await writer.close()


async def reopen(store: ObjectStore, queues: int) -> tuple[float, Counter[str], float,
                                                           Counter[str]]:
    """Seconds and requests of the open; seconds and requests of one get of each queue."""
    store.metrics.reset()
    started = time.perf_counter()
    reader = await AsyncMessageStore.open(DEFAULTS.replace(gc_interval=0),
                                          store=_KeepOpen(store))
    try:
        opened = time.perf_counter() - started
        at_open = Counter(store.metrics.requests)
        store.metrics.reset()
        started = time.perf_counter()
        gate = asyncio.Semaphore(READERS)

        async def first(q: int) -> None:
            async with gate:
                got = await reader.get(TOPIC, q, 0, max_count=1)
                assert len(got) == 1, (q, got)

        await asyncio.gather(*(first(q) for q in range(queues)))
        read = time.perf_counter() - started
        return opened, at_open, read, Counter(store.metrics.requests)
    finally:
        await reader.close()


def kinds(requests: Counter[str]) -> str:
    return ", ".join(f"{op} {n:,}" for op, n in sorted(requests.items()) if n) or "none"


async def run(env: BenchEnv) -> list[Table]:
    counts = COUNTS[env.sizes.name]
    tables = []
    for backend in (b for b in (LOCAL, SEAWEEDFS) if b in env.backends):
        table = Table(
            f"Restart at scale: a broker of quiet queues reopened ({backend} backend)",
            ["queues", "open s", "first get of every queue s", "ms a queue",
             "requests at open", "a queue", "requests of the gets"],
            goal=(f"{GOAL_QUEUES:,} queues opened and each read once within {GOAL_SECONDS} s; "
                  f"at most {GOAL_REQUESTS} requests a queue at open; the cost a queue flat "
                  f"(within {GOAL_FLAT}x) from {counts[0]:,} to {counts[-1]:,} queues")
            if backend == LOCAL else "shown, not judged")
        per_queue: dict[int, float] = {}
        worst = 0.0
        for queues in counts:
            store = await env.store(backend, f"restart-{queues}")
            try:
                await fill(store, queues)
                opened, at_open, read, of_gets = await reopen(store, queues)
            finally:
                await store.close()
            total = sum(at_open.values())
            per_queue[queues] = (opened + read) / queues
            worst = max(worst, total / queues)
            table.add(f"{queues:,}", f"{opened:.2f}", f"{read:.2f}",
                      f"{per_queue[queues] * 1000:.2f}", kinds(at_open),
                      f"{total / queues:.1f}", kinds(of_gets))
            if backend == LOCAL and queues == GOAL_QUEUES:
                table.verdict(opened + read <= GOAL_SECONDS,
                              f"{queues:,} queues opened and read in {opened + read:.1f} s")
        if backend == LOCAL:
            table.verdict(worst <= GOAL_REQUESTS,
                          f"at most {worst:.1f} requests a queue at open")
            flat = per_queue[counts[-1]] / per_queue[counts[0]]
            table.verdict(flat <= GOAL_FLAT,
                          f"the cost a queue at {counts[-1]:,} queues is {flat:.2f}x "
                          f"that at {counts[0]:,}")
        table.notes.append(f"{MESSAGES} messages of {MESSAGE // KiB} KiB a queue, one topic, "
                           f"write mode {DEFAULTS.write_mode}, the shipped configuration; "
                           f"the first gets {READERS} at a time")
        tables.append(table)
    return tables
