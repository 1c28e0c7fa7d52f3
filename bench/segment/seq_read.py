"""Sequential catch-up read of a sealed segment, front to back, cold.

A consumer that fell behind reads a whole sealed segment in ``seq_request``
pieces. The segment was written in 4 MiB chunks and merged, so its units are
4 MiB ranges of one ``segment`` object. Each run starts cold: a new Fetcher
(the shipped defaults: read-ahead 2 units growing to 8, 16 GETs at most, of
which read-ahead may hold 8), the segment opened again, its metrics reset.

Baselines, from the same run, reading the same bytes of the same object:

- raw ranged GETs: the same 4 MiB units, a sliding window of as many GETs in
  flight as the fetcher's read-ahead can have (8), each unit handed out in
  the same request size. On SeaweedFS with a bare aioboto3 client; on the
  local backend through the store's ``get_object`` (the same code the
  fetcher calls, without it).
- s3fs (SeaweedFS): ``S3FileSystem.open(key, cache_type="readahead",
  block_size=...)`` read front to back in the same request size, at a 4 MiB
  block (the unit size) and at s3fs's default 50 MiB block.
- plain file reads (local): ``read()`` of the object file in the request size.

A diagnostic row runs the same fetcher with a memory tier just big enough
for its read-ahead: it shows what keeping every unit read costs.

Every reader runs CRC32C over what it got (the check costs all the same) and
the result is compared with the segment's. Requests are counted on the wire
(botocore ``before-send`` hooks) for every S3 client, so s3fs's count comes
from its own client, not from the server. Readers take turns within each
repeat, and the median run is reported.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import resource
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import aioboto3
from botocore.config import Config

from bench.common import (
    DEFAULTS,
    LOCAL,
    SEAWEEDFS,
    BenchEnv,
    MiB,
    Table,
    WireCounter,
    human,
    mb_per_s,
    median,
    requests_text,
    start_clock,
)
from bench.segment.segments import (
    bench_path,
    open_cold,
    request_counts,
    reset_counts,
    wire_counter,
    write_sealed,
)
from tests.servers import ACCESS_KEY, SECRET_KEY
from tieredstore.checksum import crc32c
from tieredstore.objectstore import ByteRange, LocalObjectStore, ObjectStore, S3ObjectStore
from tieredstore.segment import SegmentPath

S3FS_DEFAULT_BLOCK = 50 * MiB

# A memory tier that holds the read-ahead window and little more (a diagnostic row).
SMALL_MEMORY_UNITS = DEFAULTS.readahead_chunk_max + 4

# As many GETs as the fetcher's read-ahead keeps in flight at its widest.
RAW_CONCURRENCY = min(DEFAULTS.readahead_chunk_max, max(1, DEFAULTS.read_concurrency // 2))


@dataclass
class Run:
    seconds: float
    requests: dict[str, int]
    crc: int
    fetcher: dict[str, Any] | None = None  # the fetcher's snapshot, for its rows
    page_faults: int = 0  # minor faults of the whole process during the run


async def read_with_fetcher(store: ObjectStore, path: SegmentPath, chunk_size: int,
                            request: int, memory_bytes: int | None = None) -> Run:
    segment, fetcher = await open_cold(store, path, chunk_size, memory_bytes=memory_bytes)
    wire = await wire_counter(store)
    reset_counts(store, wire)
    size = segment.commit_position
    crc = 0
    started = start_clock()
    for position in range(0, size, request):
        data = await segment.read0(position, min(request, size - position))
        crc = crc32c(data, crc)
    seconds = time.perf_counter() - started
    await fetcher.wait_idle()
    counts = request_counts(store, wire)
    snapshot = fetcher.snapshot()
    await fetcher.close()
    return Run(seconds, counts, crc, snapshot)


async def read_pipelined(get: Callable[..., Coroutine[Any, Any, bytes]],
                         units: Sequence[tuple[Any, ...]], request: int, concurrency: int
                         ) -> int:
    """GET ``units`` (``get(*unit)``) with ``concurrency`` in flight, in order; hand out
    ``request``-sized pieces of each. Returns the CRC32C of the bytes."""
    pending: collections.deque[asyncio.Task[bytes]] = collections.deque()
    todo = iter(units)
    loop = asyncio.get_running_loop()

    def start_next() -> None:
        unit = next(todo, None)
        if unit is not None:
            pending.append(loop.create_task(get(*unit)))

    for _ in range(concurrency):
        start_next()
    crc = 0
    while pending:
        data = await pending.popleft()
        start_next()
        view = memoryview(data)
        for offset in range(0, len(data), request):
            crc = crc32c(bytes(view[offset : offset + request]), crc)
    return crc


async def read_raw_s3(env: BenchEnv, store: S3ObjectStore, key: str | None,
                      units: Sequence[tuple[Any, ...]], request: int) -> Run:
    """Ranged GETs of ``units`` with RAW_CONCURRENCY in flight on a bare aioboto3
    client: ``(offset, length)`` of ``key``, or ``(key, offset, length)`` when
    ``key`` is None (units of several objects, one window over all of them)."""
    session = aioboto3.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                               region_name="us-east-1")
    config = Config(s3={"addressing_style": "path"},
                    max_pool_connections=DEFAULTS.s3_max_pool_connections,
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required")
    assert env.s3 is not None
    async with session.client("s3", endpoint_url=env.s3.endpoint_url, config=config) as client:
        keyed = [(key, *u) for u in units] if key is not None else list(units)
        await client.head_object(Bucket=store.bucket, Key=keyed[0][0])  # connect first
        wire = WireCounter()
        wire.attach(client)

        async def get(name: str, offset: int, length: int) -> bytes:
            resp = await client.get_object(Bucket=store.bucket, Key=name,
                                           Range=f"bytes={offset}-{offset + length - 1}")
            async with resp["Body"] as body:
                data: bytes = await body.read()
            return data

        started = start_clock()
        crc = await read_pipelined(get, keyed, request, RAW_CONCURRENCY)
        seconds = time.perf_counter() - started
        return Run(seconds, {"get": wire.counts["GetObject"]}, crc)


async def read_raw_local(store: ObjectStore, key: str, units: list[tuple[int, int]],
                         request: int) -> Run:
    async def get(offset: int, length: int) -> bytes:
        return await store.get(key, ByteRange(offset, length))

    store.metrics.reset()
    started = start_clock()
    crc = await read_pipelined(get, units, request, RAW_CONCURRENCY)
    seconds = time.perf_counter() - started
    return Run(seconds, {op: n for op, n in store.metrics.requests.items() if n}, crc)


def read_s3fs(env: BenchEnv, bucket: str, key: str, *, size: int, request: int, block: int
              ) -> Run:
    """s3fs's readahead file, front to back (blocking: run it in a thread)."""
    import fsspec.asyn  # type: ignore[import-untyped]
    import s3fs

    assert env.s3 is not None
    fs = s3fs.S3FileSystem(
        key=ACCESS_KEY, secret=SECRET_KEY, endpoint_url=env.s3.endpoint_url,
        client_kwargs={"region_name": "us-east-1"},
        config_kwargs={"s3": {"addressing_style": "path"}},
        skip_instance_cache=True, use_listings_cache=False,
    )
    fs.connect()
    try:
        wire = WireCounter()
        wire.attach(fs.s3)
        crc = 0
        started = start_clock()
        with fs.open(f"{bucket}/{key}", "rb", block_size=block, cache_type="readahead") as f:
            for position in range(0, size, request):
                data = f.read(min(request, size - position))
                crc = crc32c(data, crc)
        seconds = time.perf_counter() - started
    finally:
        # Close its client on its own loop now; left to the garbage collector, s3fs
        # would try from whichever loop runs then (ours), and fail.
        fsspec.asyn.sync(fs.loop, fs._s3creator.__aexit__, None, None, None)
        fs._s3 = None
    counts = {op.lower().replace("object", ""): n for op, n in wire.counts.items()}
    return Run(seconds, counts, crc)


def read_file(path: str, size: int, request: int) -> Run:
    """Plain ``read()`` of the local object file (blocking: run it in a thread)."""
    crc = 0
    started = start_clock()
    with open(path, "rb", buffering=0) as f:
        for position in range(0, size, request):
            data = f.read(min(request, size - position))
            crc = crc32c(data, crc)
    return Run(time.perf_counter() - started, {}, crc)


async def run(env: BenchEnv) -> list[Table]:
    sizes = env.sizes
    size, request, chunk = sizes.seq_segment, sizes.seq_request, sizes.chunk_size
    table = Table(
        f"Sequential catch-up read: {human(size)} sealed segment, {human(chunk)} units, "
        f"{human(request)} reads, cold",
        ["backend", "reader", "MB/s", "runs (MB/s)", "vs raw", "requests", "page faults",
         "notes"],
        goal="faster than s3fs, within 20% of raw ranged GETs at the same concurrency",
    )
    for backend in env.backends:
        store = await env.store(backend, "seq")
        try:
            await _run_backend(env, table, backend, store)
        finally:
            await store.close()
    table.notes += [
        f"median of {sizes.seq_repeats} run(s) per reader, readers taking turns, each run "
        "started once the garbage collector has run (bench.common.start_clock); requests "
        "counted on the wire for S3 clients (botocore before-send hooks), by the "
        "store's metrics on the local backend",
        f"raw = a sliding window of {RAW_CONCURRENCY} ranged GETs of the same "
        f"{human(chunk)} units (the fetcher's read-ahead maximum: readahead_chunk_max="
        f"{DEFAULTS.readahead_chunk_max}, read-ahead GETs <= read_concurrency/2="
        f"{DEFAULTS.read_concurrency // 2}); aioboto3 on SeaweedFS, the store's get_object "
        "on local",
        "fetcher = open_fetcher(defaults): memory 256 MiB, read-ahead 2..8 units, "
        "drop-behind on (a unit read through its end leaves the memory tier, so its memory "
        "is reused rather than fresh pages faulted in for each new unit), no disk tier; the "
        "row with a small memory tier differs only in memory_bytes",
        "page faults: minor page faults of the whole benchmark process during the run "
        "(getrusage), a proxy for memory touched for the first time",
    ]
    return [table]


async def _run_backend(env: BenchEnv, table: Table, backend: str, store: ObjectStore) -> None:
    sizes = env.sizes
    size, request, chunk = sizes.seq_segment, sizes.seq_request, sizes.chunk_size
    path = bench_path("seq")
    written, expected = await write_sealed(store, path, size, chunk)
    units = [(u.object_offset, u.length) for u in written.layout.units]
    key = path.merged_key

    readers: dict[str, Callable[[], Awaitable[Run]]] = {}
    readers["tieredstore Fetcher"] = lambda: read_with_fetcher(store, path, chunk, request)
    small = SMALL_MEMORY_UNITS * chunk
    readers[f"tieredstore Fetcher, memory tier {human(small)}"] = (
        lambda: read_with_fetcher(store, path, chunk, request, memory_bytes=small))
    if backend == SEAWEEDFS:
        assert isinstance(store, S3ObjectStore)
        s3 = store
        readers[f"raw aioboto3 GETs x{RAW_CONCURRENCY}"] = (
            lambda: read_raw_s3(env, s3, key, units, request))
        for block in (chunk, S3FS_DEFAULT_BLOCK):
            readers[f"s3fs readahead, block {human(block)}"] = (
                lambda block=block: asyncio.to_thread(  # type: ignore[misc]
                    functools.partial(read_s3fs, env, s3.bucket, key, size=size,
                                      request=request, block=block)))
    elif backend == LOCAL:
        assert isinstance(store, LocalObjectStore)
        readers[f"raw store GETs x{RAW_CONCURRENCY}"] = (
            lambda: read_raw_local(store, key, units, request))
        file_path = str(store._path(key))
        readers["plain file read()"] = lambda: asyncio.to_thread(read_file, file_path, size,
                                                                  request)

    runs: dict[str, list[Run]] = {name: [] for name in readers}
    for _ in range(sizes.seq_repeats):
        for name, reader in readers.items():
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            result = await reader()
            result.page_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
            if result.crc != expected:
                raise AssertionError(f"{backend} {name}: read bytes differ (CRC32C)")
            runs[name].append(result)

    raw_name = next(n for n in readers if n.startswith("raw"))
    raw_rate = median([mb_per_s(size, r.seconds) for r in runs[raw_name]])
    ours = median([mb_per_s(size, r.seconds) for r in runs["tieredstore Fetcher"]])
    table.verdict(ours >= 0.8 * raw_rate,
                  f"{backend}: Fetcher at {ours / raw_rate:.2f}x raw (need >= 0.80x)")
    s3fs_rates = {n: median([mb_per_s(size, r.seconds) for r in rs])
                  for n, rs in runs.items() if n.startswith("s3fs")}
    if s3fs_rates:
        best = max(s3fs_rates, key=lambda n: s3fs_rates[n])
        table.verdict(ours > s3fs_rates[best],
                      f"{backend}: Fetcher {ours:.0f} MB/s vs the faster s3fs "
                      f"({best}) {s3fs_rates[best]:.0f} MB/s (need faster)")
    for name, results in runs.items():
        rates = [mb_per_s(size, r.seconds) for r in results]
        rate = median(rates)
        middle = sorted(results, key=lambda r: r.seconds)[len(results) // 2]
        note = ""
        snap = middle.fetcher
        if snap is not None:
            note = (f"read-ahead hits {snap['readahead_hits']}; reads that waited for a "
                    f"unit {snap['memory_misses']} ({snap['coalesced_waits']} on a read-ahead "
                    f"in flight); prefetch waste {snap['prefetch_waste']}")
        table.add(backend, name, f"{rate:.0f}", f"{min(rates):.0f}..{max(rates):.0f}",
                  f"{rate / raw_rate:.2f}x",
                  requests_text(middle.requests), middle.page_faults, note)
