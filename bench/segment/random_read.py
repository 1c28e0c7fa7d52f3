"""Random 4 KiB reads on a sealed segment: requests per read, miss and hit.

The segment (4 MiB units of one merged object) is read at random 4 KiB
offsets. *Miss*: a read in a unit the fetcher does not hold (each round opens
the segment with a new fetcher and touches every unit once, in random
order). *Hit*: random reads anywhere once every unit is cached. Baselines:
``DirectReader`` (no cache: every read GETs its whole unit, which is what
the CRC check needs), and a bare 4 KiB ranged GET (aioboto3 on SeaweedFS,
the store's ``get`` on local), the floor for one request.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aioboto3
from botocore.config import Config

from bench.common import (
    SEAWEEDFS,
    BenchEnv,
    KiB,
    Table,
    WireCounter,
    human,
    ms,
    percentile,
)
from bench.segment.segments import bench_path, open_cold, wire_counter, write_sealed
from bench.segment.tailing import ReadCounter
from tests.servers import ACCESS_KEY, SECRET_KEY
from tieredstore.objectstore import ByteRange, ObjectStore, S3ObjectStore
from tieredstore.segment import ChunkedSegment, SegmentOptions
from tieredstore.segment.reader import DirectReader

READ = 4 * KiB
MAX_UNITS = 16  # units in the segment; more misses take more rounds


async def _timed(read: Callable[[int, int], Awaitable[bytes]], positions: list[int],
                 counter: ReadCounter) -> tuple[list[float], int]:
    before = counter.total
    latencies = []
    for position in positions:
        counter.start()
        started = time.perf_counter()
        data = await read(position, READ)
        latencies.append(time.perf_counter() - started)
        counter.stop()
        if len(data) != READ:
            raise AssertionError(f"read at {position} returned {len(data)} bytes")
    return latencies, counter.total - before


def _miss_positions(segment: ChunkedSegment, rng: random.Random) -> list[int]:
    """One 4 KiB-aligned offset in each unit, never at 0 (a read at 0 starts read-ahead)."""
    positions = []
    for unit in segment.layout.units:
        slots = unit.length // READ
        positions.append(unit.position + READ * rng.randrange(1, slots))
    rng.shuffle(positions)
    return positions


async def run(env: BenchEnv) -> list[Table]:
    sizes = env.sizes
    table = Table(
        f"Random {human(READ)} reads on a sealed segment ({human(sizes.chunk_size)} units)",
        ["backend", "reader", "case", "reads", "GETs/read", "p50 ms", "p99 ms", "requests"],
        goal="exactly one GET per read on a miss, none on a hit",
    )
    for backend in env.backends:
        store = await env.store(backend, "random")
        try:
            await _run_backend(env, table, backend, store)
        finally:
            await store.close()
    table.notes.append(
        "a miss GETs the whole unit the 4 KiB lie in (every byte returned is CRC-checked "
        "per unit); the bare 4 KiB GET row shows what one request costs at its smallest"
    )
    return [table]


async def _run_backend(env: BenchEnv, table: Table, backend: str, store: ObjectStore) -> None:
    sizes = env.sizes
    rng = random.Random(42)
    units = max(2, min(MAX_UNITS, sizes.random_misses))
    path = bench_path("random")
    written, _ = await write_sealed(store, path, units * sizes.chunk_size, sizes.chunk_size)
    size = written.commit_position
    rounds = -(-sizes.random_misses // units)
    hit_positions = [rng.randrange(READ, size - READ) for _ in range(sizes.random_hits)]

    # The fetcher: misses over fresh fetchers, then hits on the last one.
    miss_lat: list[float] = []
    miss_requests = 0
    hit_lat: list[float] = []
    hit_requests = 0
    for i in range(rounds):
        segment, fetcher = await open_cold(store, path, sizes.chunk_size)
        counter = ReadCounter(store, await wire_counter(store))
        lat, n = await _timed(segment.read0, _miss_positions(segment, rng), counter)
        miss_lat += lat
        miss_requests += n
        await fetcher.wait_idle()
        if i == rounds - 1:
            hit_lat, hit_requests = await _timed(segment.read0, hit_positions, counter)
            snap = fetcher.snapshot()
            if snap["prefetch_units"]:
                table.notes.append(f"{backend}: the fetcher prefetched {snap['prefetch_units']} "
                                   "unit(s) for random reads")
        await fetcher.close()
    _row(table, backend, "tieredstore Fetcher", "miss", miss_lat, requests=miss_requests)
    _row(table, backend, "tieredstore Fetcher", "hit", hit_lat, requests=hit_requests)
    table.verdict(miss_requests == len(miss_lat) and hit_requests == 0,
                  f"{backend}: {miss_requests} requests for {len(miss_lat)} misses, "
                  f"{hit_requests} for {len(hit_lat)} hits (need exactly 1 per miss, 0 per hit)")

    # No cache: every read is a GET of its unit.
    direct = await ChunkedSegment.open(store, path, options=SegmentOptions(
        chunk_size=sizes.chunk_size), reader=DirectReader(store))
    counter = ReadCounter(store, await wire_counter(store))
    positions = hit_positions[: max(sizes.random_misses, 1)]
    lat, n = await _timed(direct.read0, positions, counter)
    _row(table, backend, "no cache (DirectReader)", "any", lat, requests=n)

    # A bare 4 KiB ranged GET.
    key = path.merged_key
    if backend == SEAWEEDFS:
        assert isinstance(store, S3ObjectStore)
        lat, n = await _bare_s3(env, store.bucket, key, positions)
        _row(table, backend, f"bare {human(READ)} ranged GET (aioboto3)", "any", lat, requests=n)
    else:
        async def get(position: int, length: int) -> bytes:
            return await store.get(key, ByteRange(position, length))

        counter = ReadCounter(store, None)
        lat, n = await _timed(get, positions, counter)
        _row(table, backend, f"bare {human(READ)} ranged GET (store.get)", "any", lat, requests=n)


async def _bare_s3(env: BenchEnv, bucket: str, key: str, positions: list[int]
                   ) -> tuple[list[float], int]:
    assert env.s3 is not None
    session = aioboto3.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                               region_name="us-east-1")
    config = Config(s3={"addressing_style": "path"},
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required")
    client: Any
    async with session.client("s3", endpoint_url=env.s3.endpoint_url, config=config) as client:
        wire = WireCounter()
        wire.attach(client)
        await client.head_object(Bucket=bucket, Key=key)  # connect before timing
        wire.reset()
        latencies = []
        for position in positions:
            started = time.perf_counter()
            resp = await client.get_object(Bucket=bucket, Key=key,
                                           Range=f"bytes={position}-{position + READ - 1}")
            async with resp["Body"] as body:
                await body.read()
            latencies.append(time.perf_counter() - started)
        return latencies, wire.total()


def _row(table: Table, backend: str, reader: str, case: str, latencies: list[float], *,
         requests: int) -> None:
    per_read = requests / len(latencies) if latencies else float("nan")
    table.add(backend, reader, case, len(latencies), f"{per_read:.2f}",
              ms(percentile(latencies, 50)), ms(percentile(latencies, 99)), requests)
