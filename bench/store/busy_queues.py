"""Busy queues: what 64 queues written at full speed upload, per GiB of data.

Each write mode runs the same producer on the in-memory store (its chokepoint
counts every request and byte the S3 backend would see, so the figures do not
depend on the machine): ``busy_queues`` queues, each handed batches of 64
messages of 1 KiB in turn through ``append_batch`` as fast as the store takes
them, no flush until ``close()``. The shipped configuration throughout.

Two runs per mode, and a writing run of the log mode with the defaults issue 32
replaced (``chunk_wait`` 0, a 64 MiB pool), to show what they buy. At the
defaults (``chunk_wait`` 10 s, a 512 MiB pool) a busy queue's bytes wait for
5 MiB (``direct_commit_size``) and go to its segment as chunks, uploaded once,
when the host's rate fills 5 MiB per queue within ``chunk_wait`` (64 queues:
about 34 MB/s; a loaded machine's slower producer falls back to log
objects). *Writing*: ``busy_bytes_per_queue`` into each queue at
the default segment size (nothing seals): bytes uploaded (PUT and UploadPart
bodies) against the message bodies appended, and PUT-class requests (LISTs
among them, as S3 bills them) per GiB appended. Bytes a log-mode store leaves
in log objects at close are compacted by age later, one chunk per queue and
file: not counted. *Sealing*: ``busy_segment``-byte commit-log segments and
as much data per queue, so that every queue seals and merges one segment:
the bytes its merges re-upload (UploadPart bodies: parts not done by
UploadPartCopy) and read back.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.common import DEFAULTS, BenchEnv, MiB, Table
from bench.store.consume import _trailer_size
from tieredstore.objectstore import PUT_CLASS, MemoryObjectStore
from tieredstore.store import AsyncMessageStore

GiB = 1024 * MiB
MESSAGE = 1024
BATCH = 64
GOAL_BYTES = 1.1
GOAL_PUTS = 140
GOAL_BYTES_AT_DEFAULTS = 1.3  # issue 32: 64 busy queues, at the shipped defaults
OLD_DEFAULTS = {"chunk_wait": 0.0, "pool_bytes": 64 * MiB}  # before issue 32


@dataclass
class BusyRun:
    mode: str
    seconds: float
    appended: int  # bytes of records (framing included), commit log only
    requests: Counter[str]
    up: Counter[str]
    down: Counter[str]
    trailers: int = 0  # bytes of the merged objects' unit tables and footers

    @property
    def uploaded(self) -> int:
        return sum(self.up.values())

    def puts_per_gib(self) -> float:
        return sum(self.requests[op] for op in PUT_CLASS) * GiB / self.appended


async def measure(mode: str, queues: int, per_queue: int, segment: int,
                  chunk_size: int, **overrides: Any) -> BusyRun:
    backend = MemoryObjectStore()
    config = DEFAULTS.replace(backend="memory", write_mode=mode, gc_interval=0.0,
                              rolling_interval=0.0,
                              retention_interval=0.0, commit_log_max_size=segment,
                              max_message_size=min(segment, DEFAULTS.max_message_size),
                              chunk_size=chunk_size, **overrides)
    store = await AsyncMessageStore.open(config, store=backend)
    body = b"b" * MESSAGE
    batch = [body] * BATCH
    rounds = max(1, per_queue // (MESSAGE * BATCH))
    try:
        for q in range(queues):  # created before the count starts
            await store.append("busy", q, body)
        await store.flush()
        backend.metrics.reset()
        started = time.perf_counter()
        for _ in range(rounds):
            for q in range(queues):
                await store.append_batch("busy", q, batch)
    finally:
        await store.close()  # flushes, then waits for the merges
    seconds = time.perf_counter() - started
    snap = backend.metrics.snapshot()
    trailers = sum([await _trailer_size(backend, info) for info in await backend.list_all("")
                    if info.key.endswith("/segment")])
    label = mode + "".join(f", {k} {_value(v)}" for k, v in overrides.items())
    return BusyRun(label, seconds, rounds * queues * BATCH * MESSAGE,
                   Counter(snap["requests"]), Counter(snap["bytes_up"]),
                   Counter(snap["bytes_down"]), trailers)


def _size(n: int) -> str:
    return f"{n / MiB:g} MiB"


def _value(v: object) -> str:
    return _size(v) if isinstance(v, int) and v >= MiB else f"{v}"


async def run(env: BenchEnv) -> list[Table]:
    sizes = env.sizes
    queues, per_queue, segment = sizes.busy_queues, sizes.busy_bytes_per_queue, sizes.busy_segment
    chunk = DEFAULTS.chunk_size if sizes.name != "tiny" else sizes.chunk_size
    writing = Table(
        f"Busy queues, writing: {queues} queues at full speed, {_size(per_queue)} each of "
        f"{MESSAGE} B messages (in-memory store, requests and bytes as S3 would see them)",
        ["write mode", "MB/s", "uploaded / data", "PUT-class per GiB", "GETs per GiB",
         "requests"],
        goal=f"log mode at the shipped defaults: at most {GOAL_BYTES_AT_DEFAULTS}x the data "
             f"uploaded (issue 32), and the aim of {GOAL_BYTES}x and {GOAL_PUTS} PUT-class "
             "requests per GiB")
    sealing = Table(
        f"Busy queues, sealing: {queues} queues, one {_size(segment)} commit-log segment "
        f"each, sealed and merged (chunk_size {_size(chunk)})",
        ["write mode", "merge parts copied", "data re-uploaded", "trailers uploaded",
         "merge GETs"],
        goal="0 bytes re-uploaded by merges at the default chunk size")
    for mode, overrides in (("direct", {}), ("log", {}), ("log", OLD_DEFAULTS)):
        r = await measure(mode, queues, per_queue, DEFAULTS.commit_log_max_size, chunk,
                          **overrides)
        writing.add(r.mode, f"{r.appended / r.seconds / 1e6:.0f}",
                    f"{r.uploaded / r.appended:.2f}x", f"{r.puts_per_gib():.0f}",
                    f"{r.requests['get'] * GiB / r.appended:.0f}",
                    ", ".join(f"{op} {n:,}" for op, n in sorted(r.requests.items())))
        if mode == "log" and not overrides:
            ratio = r.uploaded / r.appended
            writing.verdict(ratio <= GOAL_BYTES_AT_DEFAULTS,
                            f"log at the defaults uploads {ratio:.2f}x the data (issue 32: "
                            f"at most {GOAL_BYTES_AT_DEFAULTS}x)")
            writing.verdict(ratio <= GOAL_BYTES and r.puts_per_gib() <= GOAL_PUTS,
                            f"log at the defaults: {ratio:.2f}x, {r.puts_per_gib():.0f} "
                            f"PUT-class requests per GiB (aim: {GOAL_BYTES}x, {GOAL_PUTS})")
        if overrides:
            continue
        s = await measure(mode, queues, segment, segment, chunk)
        data = s.up["upload_part"] - s.trailers
        sealing.add(s.mode, f"{s.requests['upload_part_copy']:,}", f"{data:,}",
                    f"{s.trailers:,}", f"{s.requests['get']:,}")
        if mode == "log":
            sealing.verdict(data == 0, f"log mode merges re-upload {data:,} B of data")
    writing.notes.append(
        f"data: message bodies appended; shipped defaults: chunk_size {_size(chunk)}, "
        f"group_commit_interval {DEFAULTS.group_commit_interval} s, chunk_wait "
        f"{DEFAULTS.chunk_wait} s, pool_bytes {_size(DEFAULTS.pool_bytes)}, "
        f"direct_commit_size {_size(DEFAULTS.direct_commit_size)}; batches of {BATCH} "
        "through append_batch, queues in turn")
    writing.notes.append(
        f"chunk_wait {DEFAULTS.chunk_wait} s: a queue whose bytes make "
        f"{_size(DEFAULTS.direct_commit_size)} within it sits group commits out "
        "(docs/log-objects.md); its bytes become durable and visible to other processes up to "
        "that late unless flushed. The last row: the defaults before issue 32")
    sealing.notes.append(
        "at the defaults a queue's bytes go to its segment as chunks of 5 MiB or more (a "
        "commit the pool makes for room, or at chunk_wait), so a segment may end in a "
        "partial chunk under 5 MiB, which the merge uploads again with the trailer (S3: "
        "only the last part may be under 5 MiB, and the trailer's part is last): at most "
        "5 MiB a segment, 0.5% of a 1 GiB one, here 16 MiB segments. With the defaults "
        "before issue 32 (chunk_wait 0, a 64 MiB pool) the merges re-uploaded nothing, "
        "for compaction had uploaded every byte again into full chunks: 2.1x in all")
    return [writing, sealing]
