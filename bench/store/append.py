"""Appending 1 KiB messages to one queue: per message, in batches, async and sync.

Local backend (fsync on, as shipped), the default configuration, one queue;
timed from the first append until ``flush()`` returns. Baseline in the same
run: plain Python that frames each record (head, CRC32C of the rest) into a
4 MiB buffer and writes it to a file with fsync, the cheapest durable log a
host could write itself. Batches are ``append_batch`` calls of ``BATCH``
messages.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import struct
import time
from collections.abc import Awaitable, Callable

from bench.common import DEFAULTS, LOCAL, BenchEnv, KiB, MiB, Table, human, median
from tieredstore.checksum import crc32c
from tieredstore.objectstore import ObjectStore
from tieredstore.store import AsyncMessageStore, MessageStore

BATCH = 256
MESSAGE = 1 * KiB
VOLUMES = {"full": 64 * MiB, "quick": 16 * MiB, "tiny": 1 * MiB}
_HEAD = struct.Struct(">III")
_FIELDS = struct.Struct(">QqIHHHI")


def plain_python(path: str, count: int, body: bytes) -> float:
    """Frame ``count`` records into 4 MiB buffers, write and fsync each: seconds."""
    started = time.perf_counter()
    buffer = bytearray()
    with open(path, "wb") as out:
        for offset in range(count):
            fields = _FIELDS.pack(offset, 1_700_000_000_000, 0, 0xFFFF, 0, 0, len(body))
            crc = crc32c(body, crc32c(fields))
            buffer += _HEAD.pack(_HEAD.size + len(fields) + len(body), 0x54534D31, crc)
            buffer += fields
            buffer += body
            if len(buffer) >= 4 * MiB:
                out.write(buffer)
                out.flush()
                os.fsync(out.fileno())
                buffer.clear()
        out.write(buffer)
        out.flush()
        os.fsync(out.fileno())
    return time.perf_counter() - started


async def timed_async(store: ObjectStore, count: int, body: bytes, *, batch: bool) -> float:
    ms = await AsyncMessageStore.open(DEFAULTS.replace(gc_interval=0), store=store)
    try:
        started = time.perf_counter()
        if batch:
            messages = [body] * BATCH
            for _ in range(count // BATCH):
                await ms.append_batch("bench", 0, messages)
        else:
            for _ in range(count):
                await ms.append("bench", 0, body)
        await ms.flush()
        return time.perf_counter() - started
    finally:
        await ms.close()


def timed_sync(store: ObjectStore, count: int, body: bytes, *, batch: bool) -> float:
    with MessageStore.open(DEFAULTS.replace(gc_interval=0), store=store) as ms:
        started = time.perf_counter()
        if batch:
            messages = [body] * BATCH
            for _ in range(count // BATCH):
                ms.append_batch("bench", 0, messages)
        else:
            for _ in range(count):
                ms.append("bench", 0, body)
        ms.flush()
        return time.perf_counter() - started


async def run(env: BenchEnv) -> list[Table]:
    if LOCAL not in env.backends:
        return []
    count = VOLUMES[env.sizes.name] // MESSAGE
    count -= count % BATCH
    body = os.urandom(MESSAGE)
    rounds = env.sizes.write_repeats
    table = Table(f"Append: {count:,} messages of {human(MESSAGE)} to one queue, local "
                  "backend (fsync), until flush returns",
                  ["backend", "writer", "messages/s", "runs (messages/s)", "vs plain Python"],
                  goal="append_batch at least 0.5x plain Python; async append and sync "
                       "append_batch at least 100k messages/s")
    plain = "plain Python: frame, CRC32C, write 4 MiB + fsync"

    async def fresh() -> ObjectStore:
        return await env.store(LOCAL, "append")

    logs = itertools.count()

    async def baseline(_: ObjectStore) -> float:
        # A new file each round, as the store writes new objects: rewriting one
        # file that was just truncated fsyncs faster on ext4 (110 ms against 190).
        path = env.workdir / f"plain-{next(logs)}.log"
        return await asyncio.to_thread(plain_python, str(path), count, body)

    runs: dict[str, Callable[[ObjectStore], Awaitable[float]]] = {
        plain: baseline,
        f"AsyncMessageStore.append_batch ({BATCH})":
            lambda s: timed_async(s, count, body, batch=True),
        "AsyncMessageStore.append": lambda s: timed_async(s, count, body, batch=False),
        f"MessageStore.append_batch ({BATCH}, sync)":
            lambda s: asyncio.to_thread(timed_sync, s, count, body, batch=True),
        "MessageStore.append (sync)":
            lambda s: asyncio.to_thread(timed_sync, s, count, body, batch=False),
    }
    # Writers take turns, round after round: the disk's fsync speed drifts over
    # seconds on a shared machine, and each ratio is of medians of the same rounds.
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, go in runs.items():
            samples[name].append(count / await go(await fresh()))
    rates = {name: median(values) for name, values in samples.items()}
    base = rates[plain]
    for name, rate in rates.items():
        spread = "..".join(f"{v:,.0f}" for v in (min(samples[name]), max(samples[name])))
        table.add(LOCAL, name, f"{rate:,.0f}", spread, f"{rate / base:.2f}x")
    table.notes.append(f"median of {rounds} run(s) per writer, writers taking turns")
    batch_rate = rates[f"AsyncMessageStore.append_batch ({BATCH})"]
    table.verdict(batch_rate >= 0.5 * base, f"append_batch at {batch_rate / base:.2f}x plain "
                  "Python (need >= 0.5x)")
    single = rates["AsyncMessageStore.append"]
    table.verdict(single >= 100_000, f"async append {single:,.0f} messages/s (need >= 100k)")
    sync_batch = rates[f"MessageStore.append_batch ({BATCH}, sync)"]
    table.verdict(sync_batch >= 100_000,
                  f"sync append_batch {sync_batch:,.0f} messages/s (need >= 100k)")
    return [table]
