"""Tailing read latency: data read back right after it was written.

A consumer that keeps up reads each batch the moment it is durable. Rows:

- ``commit0`` + Fetcher: each small batch is committed (one chunk object
  each) through a segment whose reader is a Fetcher, then read back at once.
  The fetcher keeps units this process committed in its memory tier.
- ``commit0`` + no cache (baseline): the same with ``DirectReader``, which
  GETs the chunk again: what every read of tiered data costs without the
  fetcher.
- pool append + ``pool.read``: batches appended through the
  ``UploadBufferPool`` (shipped defaults), read back at once whether the pool
  has committed them yet or not (buffer, else the fetcher's memory tier).

Latency is of the read alone; requests are counted only while reads run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable

from bench.common import DEFAULTS, BenchEnv, Table, WireCounter, human, ms, percentile
from bench.segment.segments import bench_path, default_fetcher, wire_counter
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import ChunkedSegment, SegmentOptions
from tieredstore.segment.pool import UploadBufferPool
from tieredstore.segment.reader import DirectReader, SegmentReader
from tieredstore.store import pool_options


class ReadCounter:
    """Requests made while reads run: from the wire for S3, else the store's metrics."""

    def __init__(self, store: ObjectStore, wire: WireCounter | None) -> None:
        self.store = store
        self.wire = wire
        self.total = 0
        self._mark = 0

    def _now(self) -> int:
        return self.wire.total() if self.wire is not None else self.store.metrics.total_requests()

    def start(self) -> None:
        self._mark = self._now()

    def stop(self) -> None:
        self.total += self._now() - self._mark


async def _measure(n: int, size: int, write: Callable[[int, bytes], Awaitable[None]],
                   read: Callable[[int, int], Awaitable[bytes]], counter: ReadCounter
                   ) -> list[float]:
    block = os.urandom(size)
    latencies: list[float] = []
    position = 0
    for i in range(n):
        data = i.to_bytes(8, "big") + block[8:]
        await write(position, data)
        counter.start()
        started = time.perf_counter()
        got = await read(position, size)
        latencies.append(time.perf_counter() - started)
        counter.stop()
        if got != data:
            raise AssertionError(f"tailing read at {position} returned other bytes")
        position += size
    return latencies


async def _commit_rows(env: BenchEnv, table: Table, backend: str) -> None:
    n, size = env.sizes.tail_commits, env.sizes.tail_commit_size
    options = SegmentOptions(chunk_size=env.sizes.chunk_size)
    for label in ("commit0 + Fetcher", "commit0 + no cache (DirectReader)"):
        store = await env.store(backend, "tail")
        fetcher = default_fetcher(store) if "Fetcher" in label else None
        reader: SegmentReader = fetcher if fetcher is not None else DirectReader(store)
        try:
            segment = await ChunkedSegment.open(store, bench_path("tail"), options=options,
                                                reader=reader)
            counter = ReadCounter(store, await wire_counter(store))
            latencies = await _measure(n, size, segment.commit0, segment.read0, counter)
            _row(table, backend, label, latencies, counter.total)
        finally:
            if fetcher is not None:
                await fetcher.close()
            await store.close()


async def _pool_row(env: BenchEnv, table: Table, backend: str) -> None:
    n, size = env.sizes.tail_commits, env.sizes.tail_commit_size
    store = await env.store(backend, "tailpool")
    fetcher = default_fetcher(store)
    pool = UploadBufferPool(pool_options(DEFAULTS.replace(
        chunk_size=env.sizes.chunk_size)))
    try:
        segment = await ChunkedSegment.open(
            store, bench_path("tailpool"), options=SegmentOptions(chunk_size=env.sizes.chunk_size),
            reader=fetcher)

        async def append(position: int, data: bytes) -> None:
            at = await pool.append(segment, data)
            assert at == position

        async def read(position: int, length: int) -> bytes:
            return await pool.read(segment, position, length)

        counter = ReadCounter(store, await wire_counter(store))
        latencies = await _measure(n, size, append, read, counter)
        await pool.flush()
        _row(table, backend, "pool append + pool.read", latencies, counter.total)
    finally:
        await pool.close()
        await fetcher.close()
        await store.close()


def _row(table: Table, backend: str, label: str, latencies: list[float], requests: int) -> None:
    p99 = percentile(latencies, 99)
    table.add(backend, label, len(latencies), ms(percentile(latencies, 50)), ms(p99),
              ms(max(latencies)), requests)
    if "no cache" not in label:
        table.verdict(requests == 0 and p99 < 0.001,
                      f"{backend}, {label}: {requests} requests, p99 {ms(p99)} ms "
                      "(need 0 and < 1 ms)")


async def run(env: BenchEnv) -> list[Table]:
    sizes = env.sizes
    table = Table(
        f"Tailing read of just-written data: {sizes.tail_commits} batches of "
        f"{human(sizes.tail_commit_size)}, each read back at once",
        ["backend", "path", "reads", "p50 ms", "p99 ms", "max ms", "requests during reads"],
        goal="no S3 request, p99 under 1 ms",
    )
    for backend in env.backends:
        await _commit_rows(env, table, backend)
        await _pool_row(env, table, backend)
    table.notes.append(
        "each commit0 writes one chunk object (PUT); the pool commits on its own schedule "
        f"(full {human(sizes.chunk_size)} chunks or every "
        f"{DEFAULTS.group_commit_interval} s); latency is the read call alone"
    )
    return [table]
