"""Flushing producers: what a producer that calls ``flush()`` every N bytes uploads.

One queue on the in-memory store (its chokepoint counts every request and
byte the S3 backend would see), the shipped configuration but for the
commit-log segment size (``flushing_segment``): batches of 64 messages of
1 KiB through ``append_batch``, as fast as the store takes them, and a
``flush()`` each time ``flush_every`` bytes of messages were appended since
the last. One segment and one more batch are appended, so the first segment
rolls, seals and merges before ``close()`` returns. Figures, against the
message bodies appended: bytes uploaded (PUT and UploadPart bodies: log
objects, chunks, merge parts, consume queue and index), PUT-class requests
(LISTs among them, as S3 bills them) per GiB, and what the merge did with the
segment's bytes: copied server-side (UploadPartCopy) or read back and
uploaded again (UploadPart bodies, trailers left out).

Below S3's part minimum (5 MiB) a flush's bytes cannot be a part of their
own: they go into a log object (one PUT shared by every queue flushing with
it), and a compaction chunk or the merge uploads them again
(``tieredstore.segment.planner``): about 2x, the floor for such producers.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.common import DEFAULTS, BenchEnv, MiB, Table
from bench.store.busy_queues import PUT_CLASS, GiB
from bench.store.consume import _trailer_size
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.store import AsyncMessageStore

MESSAGE = 1024
BATCH = 64
GOAL_BYTES = 1.1
GOAL_REUPLOAD = 0.05
# (write mode, flush every N bytes; 0: no flush until close()). The direct mode's
# row shows the floor's other form: chunks under 5 MiB that the merge uploads again.
RUNS = (("log", 1_000_000), ("log", 5 * MiB), ("log", 8 * MiB), ("log", 0),
        ("direct", 1_000_000))


@dataclass
class FlushRun:
    flush_every: int
    appended: int
    seconds: float
    requests: Counter[str]
    up: Counter[str]
    merged: int  # data bytes of the merged segment objects
    reuploaded: int  # UploadPart bodies of merges, trailers left out

    @property
    def uploaded(self) -> int:
        return sum(self.up.values())

    def puts_per_gib(self) -> float:
        return sum(self.requests[op] for op in PUT_CLASS) * GiB / self.appended


async def measure(flush_every: int, segment: int, mode: str = "log", **overrides: Any) -> FlushRun:
    backend = MemoryObjectStore()
    config = DEFAULTS.replace(backend="memory", write_mode=mode, gc_interval=0.0,
                              rolling_interval=0.0, retention_interval=0.0,
                              commit_log_max_size=segment,
                              max_message_size=min(segment, DEFAULTS.max_message_size),
                              **overrides)
    store = await AsyncMessageStore.open(config, store=backend)
    body = b"f" * MESSAGE
    batch = [body] * BATCH
    rounds = segment // (MESSAGE * BATCH) + 1  # past the segment: it rolls
    try:
        await store.append("flush", 0, body)  # created before the count starts
        await store.flush()
        backend.metrics.reset()
        started = time.perf_counter()
        since = 0
        for _ in range(rounds):
            await store.append_batch("flush", 0, batch)
            since += BATCH * MESSAGE
            if flush_every and since >= flush_every:
                await store.flush()
                since = 0
    finally:
        await store.close()  # flushes, then waits for the merges
    seconds = time.perf_counter() - started
    snap = backend.metrics.snapshot()
    merged = [info for info in await backend.list_all("") if info.key.endswith("/segment")]
    trailers = sum([await _trailer_size(backend, info) for info in merged])
    up = Counter(snap["bytes_up"])
    return FlushRun(flush_every, rounds * BATCH * MESSAGE, seconds, Counter(snap["requests"]),
                    up, sum(info.size for info in merged) - trailers,
                    up["upload_part"] - trailers)


def _every(n: int) -> str:
    if n == 0:
        return "never (close only)"
    return f"{n / MiB:g} MiB" if n % MiB == 0 else f"{n / 1e6:g} MB"


async def run(env: BenchEnv) -> list[Table]:
    segment = env.sizes.flushing_segment
    table = Table(
        f"Flushing producers: one queue, flush() every N bytes, through the roll, seal "
        f"and merge of a {segment / MiB:g} MiB commit-log segment (in-memory store, "
        "requests and bytes as S3 would see them; shipped defaults otherwise)",
        ["write mode", "flush every", "uploaded / data", "PUT-class per GiB", "merge: copied",
         "merge: re-uploaded", "re-uploaded / data", "requests"],
        goal=f"at most {GOAL_BYTES}x the data uploaded and at most {GOAL_REUPLOAD:.0%} of it "
             "re-uploaded by merges for a producer flushing every 5 MiB or more")
    for mode, every in RUNS:
        r = await measure(every, segment, mode)
        ratio, again = r.uploaded / r.appended, r.reuploaded / r.appended
        table.add(mode, _every(every), f"{ratio:.2f}x", f"{r.puts_per_gib():.0f}",
                  f"{r.merged - r.reuploaded:,}", f"{r.reuploaded:,}", f"{again:.1%}",
                  ", ".join(f"{op} {n:,}" for op, n in sorted(r.requests.items())))
        if mode == "log" and (every == 0 or every >= 5 * MiB):
            table.verdict(ratio <= GOAL_BYTES and again <= GOAL_REUPLOAD,
                          f"{mode}, flush every {_every(every)}: {ratio:.3f}x uploaded, "
                          f"{again:.1%} re-uploaded")
    table.notes.append(
        f"data: message bodies appended ({MESSAGE} B messages, batches of {BATCH}); "
        f"shipped defaults: chunk_size {DEFAULTS.chunk_size / MiB:g} MiB, "
        f"group_commit_interval {DEFAULTS.group_commit_interval} s, chunk_wait "
        f"{DEFAULTS.chunk_wait} s, pool_bytes {DEFAULTS.pool_bytes / MiB:g} MiB, "
        f"direct_commit_size {DEFAULTS.direct_commit_size / MiB:g} MiB")
    table.notes.append(
        "what every byte uploaded once costs: the commit log's records (3% framing past the "
        "bodies) and their consume-queue units (32 B a message, 3%): about 1.06x")
    table.notes.append(
        "what a flushing producer still uploads twice: its consume-queue units (32 B a "
        "message, 3%), which go into a log object at each flush and into chunks later (the "
        "table counts the chunks compaction made before close: about 2.4%), and the bytes "
        "of the flush that ends the segment and of the one that starts the next when under "
        "5 MiB (the first: once more by the merge, with the trailer). A flush's remainder "
        "behind a chunk joins that chunk (a full chunk waits for 5 MiB behind it): one chunk "
        "per flush of 5 MiB or more")
    table.notes.append(
        "flush every 1 MB: S3's floor. Its bytes are below the 5 MiB part minimum, so "
        "they go into log objects and are uploaded again into a chunk (docs/log-objects.md, "
        "Log objects); in the direct mode they would be chunks below 5 MiB that the merge "
        "cannot copy and uploads again. Either way about 2x.")
    return [table]
