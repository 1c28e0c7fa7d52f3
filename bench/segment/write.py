"""Writes through the upload buffer pool: throughput, and memory under many queues.

Throughput: ``write_queues`` queues (a ``ChunkedSegment`` each) append
``write_message``-byte messages concurrently, one task per queue, yielding
to the others every 16 messages, through one ``UploadBufferPool`` with the
shipped defaults (64 MiB budget, 4 MiB chunks, 16 uploads at once, 0.2 s
group commit). Timed from the first append until ``flush()`` returns. The
baseline PUTs the very objects the pool wrote (same count and sizes) with the
same number in flight (``upload_concurrency``), each body ready in memory.

Memory: a child process (``bench.segment.rss_child``) opens ``rss_queues`` segments
and a pool of ``rss_pool`` bytes, then appends to every queue round-robin.
Its resident set is sampled with psutil every 2 ms from a thread; the growth
is peak RSS minus RSS once the segments are open, before the first append.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aioboto3
from botocore.config import Config

from bench.common import (
    DEFAULTS,
    SEAWEEDFS,
    BenchEnv,
    MiB,
    Table,
    WireCounter,
    human,
    mb_per_s,
    requests_text,
)
from bench.segment.segments import bench_path, request_counts, reset_counts, wire_counter
from tests.servers import ACCESS_KEY, SECRET_KEY
from tieredstore.objectstore import ObjectStore, S3ObjectStore
from tieredstore.segment import ChunkedSegment, SegmentOptions
from tieredstore.segment.pool import PoolOptions, UploadBufferPool
from tieredstore.store.base import compose

REPO_ROOT = Path(__file__).resolve().parent.parent
YIELD_EVERY = 16  # messages a producer appends before letting the others run


def pool_options(chunk_size: int, budget: int | None = None) -> PoolOptions:
    config = DEFAULTS.replace(chunk_size=chunk_size)
    if budget is not None:
        config = config.replace(pool_bytes=budget)
    return compose.pool_options(config)


async def append_all(pool: UploadBufferPool, segments: list[ChunkedSegment], per_queue: int,
                     message: int) -> None:
    """Every segment gets ``per_queue`` bytes in ``message``-byte appends, concurrently."""
    block = os.urandom(max(per_queue, message))

    async def producer(segment: ChunkedSegment) -> None:
        for i, offset in enumerate(range(0, per_queue, message)):
            await pool.append(segment, block[offset : offset + message])
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)

    await asyncio.gather(*(producer(s) for s in segments))
    await pool.flush()


@dataclass
class WriteRun:
    seconds: float
    requests: dict[str, int]
    objects: list[int] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)


async def _pool_run(env: BenchEnv, store: ObjectStore, repeat: int) -> WriteRun:
    sizes = env.sizes
    options = SegmentOptions(chunk_size=sizes.chunk_size)
    segments = [await ChunkedSegment.open(store, bench_path(f"write{repeat}", q),
                                          options=options)
                for q in range(sizes.write_queues)]
    wire = await wire_counter(store)
    reset_counts(store, wire)
    pool = UploadBufferPool(pool_options(sizes.chunk_size))
    started = time.perf_counter()
    await append_all(pool, segments, sizes.write_bytes_per_queue, sizes.write_message)
    seconds = time.perf_counter() - started
    counts = request_counts(store, wire)
    snapshot = pool.snapshot()
    await pool.close()
    objects = [u.length for s in segments for u in s.layout.units]
    return WriteRun(seconds, counts, objects, snapshot)


async def _raw_puts(env: BenchEnv, backend: str, store: ObjectStore, objects: list[int],
                    repeat: int) -> WriteRun:
    """PUT objects of the given sizes, ``upload_concurrency`` at a time."""
    body = os.urandom(max(objects))
    bodies = [body[:n] for n in objects]  # ready before the clock starts
    limit = asyncio.Semaphore(DEFAULTS.upload_concurrency)
    if backend == SEAWEEDFS:
        assert isinstance(store, S3ObjectStore) and env.s3 is not None
        session = aioboto3.Session(aws_access_key_id=ACCESS_KEY,
                                   aws_secret_access_key=SECRET_KEY, region_name="us-east-1")
        config = Config(s3={"addressing_style": "path"},
                        max_pool_connections=DEFAULTS.s3_max_pool_connections,
                        request_checksum_calculation="when_required",
                        response_checksum_validation="when_required")
        client: Any
        async with session.client("s3", endpoint_url=env.s3.endpoint_url,
                                  config=config) as client:
            await client.head_bucket(Bucket=store.bucket)  # connect before timing
            wire = WireCounter()
            wire.attach(client)

            async def put_s3(i: int) -> None:
                async with limit:
                    await client.put_object(Bucket=store.bucket, Key=f"raw{repeat}/{i:08d}",
                                            Body=bodies[i])

            started = time.perf_counter()
            await asyncio.gather(*(put_s3(i) for i in range(len(bodies))))
            return WriteRun(time.perf_counter() - started, {"put": wire.counts["PutObject"]})

    async def put_store(i: int) -> None:
        async with limit:
            await store.put(f"raw{repeat}/{i:08d}", bodies[i], if_none_match=True)

    store.metrics.reset()
    started = time.perf_counter()
    await asyncio.gather(*(put_store(i) for i in range(len(bodies))))
    return WriteRun(time.perf_counter() - started,
                    {op: n for op, n in store.metrics.requests.items() if n})


def _sizes_text(objects: list[int]) -> str:
    if not objects:
        return "-"
    return (f"{len(objects)} objects, {min(objects) / MiB:.2f}..{max(objects) / MiB:.2f} MiB, "
            f"mean {sum(objects) / len(objects) / MiB:.2f} MiB")


async def throughput(env: BenchEnv) -> Table:
    sizes = env.sizes
    total = sizes.write_queues * sizes.write_bytes_per_queue
    options = pool_options(sizes.chunk_size)
    table = Table(
        f"Write: {sizes.write_queues} queues appending {human(sizes.write_message)} messages "
        f"concurrently, {human(total)} in all",
        ["backend", "writer", "MB/s", "vs raw", "requests", "objects written", "notes"],
        goal="(issue 3) compare with raw parallel PUTs of the same chunks at the same "
             "concurrency",
    )
    for backend in env.backends:
        store = await env.store(backend, "write")
        pool_runs: list[WriteRun] = []
        raw_runs: list[WriteRun] = []
        try:
            for repeat in range(sizes.write_repeats):
                pool_runs.append(await _pool_run(env, store, repeat))
                raw_runs.append(await _raw_puts(env, backend, store, pool_runs[-1].objects,
                                                repeat))
        finally:
            await store.close()
        # Both rows from one repeat (the one whose pool/raw ratio is the median), so that
        # each figure stands beside the baseline that wrote the very same objects.
        order = sorted(range(len(pool_runs)),
                       key=lambda i: raw_runs[i].seconds / pool_runs[i].seconds)
        middle = order[len(order) // 2]
        pool_run, raw_run = pool_runs[middle], raw_runs[middle]
        rate, raw_rate = mb_per_s(total, pool_run.seconds), mb_per_s(total, raw_run.seconds)
        snap = pool_run.snapshot
        triggers = ", ".join(f"{k} {v}" for k, v in snap["scheduled_by"].items() if v)
        table.add(backend, "UploadBufferPool", f"{rate:.0f}", f"{rate / raw_rate:.2f}x",
                  requests_text(pool_run.requests), _sizes_text(pool_run.objects),
                  f"commits made due by: {triggers}; appends that waited {snap['waits']}")
        table.add(backend, f"raw parallel PUTs x{options.upload_concurrency}",
                  f"{raw_rate:.0f}", "1.00x", requests_text(raw_run.requests),
                  "the same sizes", "")
    table.notes.append(
        f"pool: budget {human(options.budget_bytes)}, chunk {human(options.chunk_size)}, "
        f"upload_concurrency {options.upload_concurrency}, group commit "
        f"{options.group_commit_interval} s; the pool's time includes every append (a copy "
        "of each message) and the joins into chunk bodies; raw PUTs start with their bodies "
        "in memory (aioboto3 PutObject on SeaweedFS, store.put with If-None-Match on local); "
        f"{sizes.write_repeats} repeat(s), pool and raw taking turns; shown: the repeat with "
        "the median pool/raw ratio"
    )
    return table


def rss_child_command(env: BenchEnv, backend: str, budget: int) -> list[str]:
    sizes = env.sizes
    args = [sys.executable, "-m", "bench.segment.rss_child",
            "--queues", str(sizes.rss_queues), "--bytes-per-queue", str(sizes.rss_bytes_per_queue),
            "--message", str(sizes.write_message), "--chunk-size", str(sizes.chunk_size),
            "--pool-bytes", str(budget)]
    if backend == SEAWEEDFS:
        assert env.s3 is not None
        args += ["--endpoint", env.s3.endpoint_url,
                 "--bucket", f"bench-rss-{os.getpid()}-{budget}"]
    else:
        args += ["--local", str(env.workdir / f"rss-{budget}")]
    return args


async def memory(env: BenchEnv) -> Table:
    sizes = env.sizes
    table = Table(
        f"Memory: {sizes.rss_queues} open queues, {human(sizes.rss_pool)} pool, "
        f"{human(sizes.rss_queues * sizes.rss_bytes_per_queue)} appended round-robin",
        ["backend", "RSS before appends", "peak RSS (sampled)", "peak RSS (VmHWM)",
         "growth", "growth / pool", "pool peak bytes", "MB/s", "requests"],
        goal="RSS growth under 2x the pool",
    )
    for backend in env.backends:
        command = rss_child_command(env, backend, sizes.rss_pool)
        proc = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True,
                                       cwd=REPO_ROOT, timeout=600, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"rss child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        # The larger of the two peaks: the sampler can miss a spike shorter than 2 ms,
        # the kernel's mark (where there is one) cannot.
        kernel = result["peak_rss_kernel"]
        growth = max(result["peak_rss"], kernel or 0) - result["rss_before"]
        table.add(backend, f"{result['rss_before'] / MiB:.0f} MiB",
                  f"{result['peak_rss'] / MiB:.0f} MiB",
                  "-" if kernel is None else f"{kernel / MiB:.0f} MiB",
                  f"{growth / MiB:.0f} MiB",
                  f"{growth / sizes.rss_pool:.2f}x",
                  f"{result['pool_peak_bytes'] / MiB:.1f} MiB",
                  f"{result['mb_per_s']:.0f}", requests_text(result["requests"]))
        table.verdict(growth < 2 * sizes.rss_pool,
                      f"{backend}: RSS grew {growth / sizes.rss_pool:.2f}x the pool (need < 2x)")
    table.notes.append(
        "measured in a child process (python -m bench.segment.rss_child) so that nothing else "
        "this run allocated counts: psutil samples RSS every 2 ms from a thread, and the "
        "kernel's peak mark (VmHWM, reset through /proc/self/clear_refs once the queues are "
        "open) catches what sampling misses; growth = the larger peak - RSS before the first "
        "append; segments read with DirectReader (no fetcher cache) so that only the write "
        "path's memory shows"
    )
    return table


async def run(env: BenchEnv) -> list[Table]:
    return [await throughput(env), await memory(env)]
