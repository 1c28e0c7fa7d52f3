"""Server-side encryption: what SSE-S3 costs on writes and catch-up reads (SeaweedFS).

The same producer writes ``VOLUMES`` bytes of 16 KiB messages into 4 queues
through ``AsyncMessageStore`` (defaults, log compacted into chunks before
close), once with ``s3_sse = ""`` and once with ``"AES256"``, each on a bucket
of its own; a fresh read-only store then reads every queue back with
``get(max_count=256)``. SeaweedFS encrypts and decrypts on the server (it has
no KMS here: SSE-KMS is not measured). MB/s are of message bodies; requests
as the store counted them.
"""

from __future__ import annotations

import dataclasses
import os
import time

from bench.common import DEFAULTS, SEAWEEDFS, BenchEnv, KiB, MiB, Table, mb_per_s, median
from bench.consume import _KeepOpen
from tieredstore.objectstore import S3ObjectStore
from tieredstore.store import AsyncMessageStore

QUEUES = 4
MESSAGE = 16 * KiB
VOLUMES = {"full": 128 * MiB, "quick": 32 * MiB, "tiny": 1 * MiB}
REPEATS = {"full": 3, "quick": 1, "tiny": 1}


async def _one(env: BenchEnv, sse: str) -> tuple[float, float, int, int]:
    """Write then read back: seconds of each, PUT-class and GET requests."""
    plain = await env.store(SEAWEEDFS, f"sse-{sse.lower() or 'none'}")
    assert isinstance(plain, S3ObjectStore)
    settings = plain.settings
    await plain.close()
    store = S3ObjectStore(dataclasses.replace(settings, sse=sse))
    config = DEFAULTS.replace(gc_interval=0.0, s3_sse=sse)
    volume = VOLUMES[env.sizes.name]
    body = os.urandom(MESSAGE)
    per_queue = volume // QUEUES // MESSAGE
    try:
        writer = await AsyncMessageStore.open(config, store=_KeepOpen(store))
        started = time.perf_counter()
        for q in range(QUEUES):
            await writer.append_batch("sse", q, [body] * per_queue)
        await writer.flush()
        await writer.compact_log(time.time() + config.log_compact_age + 1)
        await writer.close()
        write_s = time.perf_counter() - started
        puts = sum(n for op, n in store.metrics.requests.items() if op != "get")
        store.metrics.reset()
        reader = await AsyncMessageStore.open_read_only(config, store=_KeepOpen(store))
        started = time.perf_counter()
        for q in range(QUEUES):
            offset = 0
            while offset < per_queue:
                offset = (await reader.get("sse", q, offset, max_count=256))[-1].offset + 1
        read_s = time.perf_counter() - started
        await reader.close()
        return write_s, read_s, puts, store.metrics.requests.get("get", 0)
    finally:
        await store.close()


async def run(env: BenchEnv) -> list[Table]:
    table = Table("Encryption: SSE-S3 on SeaweedFS, writes and catch-up reads through the store",
                  ["s3_sse", "write MB/s", "catch-up MB/s", "write requests", "GETs"],
                  goal="shown, not judged: what server-side encryption costs")
    if SEAWEEDFS not in env.backends or env.s3 is None:
        table.notes.append("not run: needs SeaweedFS")
        return [table]
    volume = VOLUMES[env.sizes.name] // QUEUES // MESSAGE * QUEUES * MESSAGE
    for sse in ("", "AES256"):
        runs = [await _one(env, sse) for _ in range(REPEATS[env.sizes.name])]
        write_s = median([r[0] for r in runs])
        read_s = median([r[1] for r in runs])
        table.add(sse or '"" (none)', f"{mb_per_s(volume, write_s):.0f}",
                  f"{mb_per_s(volume, read_s):.0f}", runs[0][2], runs[0][3])
    table.notes.append(f"{volume // MiB} MiB of {MESSAGE // KiB} KiB messages in {QUEUES} "
                       "queues; medians of the runs; SSE-KMS is not measured (no KMS here)")
    return [table]
