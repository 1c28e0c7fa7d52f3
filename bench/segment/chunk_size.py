"""The default chunk size: write cost, merge bytes and catch-up reads at 4, 8 and 16 MiB.

For each chunk size: the exact requests to write a 1 GiB segment in full
chunks and merge it (in-memory store, as :mod:`bench.segment.segment_cost` counts
them), then on each backend a catch-up read of a sealed, merged segment of
the run's size through a fresh fetcher at the default read-ahead (2..8
units), median of the run's repeats. ``tieredstore/config/tieredstore.toml``
records the choice made from this table.
"""

from __future__ import annotations

from bench.common import BenchEnv, Table, human, mb_per_s, median
from bench.segment.segment_cost import measure
from bench.segment.segments import bench_path, write_sealed
from bench.segment.seq_read import read_with_fetcher
from tieredstore.config import TieredStoreConfig
from tieredstore.sizes import MiB

CHUNK_SIZES = (4 * MiB, 8 * MiB, 16 * MiB)


async def run(env: BenchEnv) -> list[Table]:
    if not env.sizes.segment_cost:
        return []
    default = TieredStoreConfig().chunk_size
    size, request = env.sizes.seq_segment, env.sizes.seq_request
    table = Table(
        f"Chunk size: write and merge cost of 1 GiB (exact), catch-up read of {human(size)}",
        ["chunk size", "PUTs / GiB", "merge: part copies / uploads",
         "merge bytes re-uploaded", "backend", "catch-up MB/s", "GETs"],
        goal=f"(reference) the default, {human(default)}, merges by server-side copy and "
             "halves the PUTs of 4 MiB")
    for chunk in CHUNK_SIZES:
        cost = await measure(chunk)
        for backend in env.backends:
            store = await env.store(backend, f"chunk-{chunk // MiB}")
            try:
                path = bench_path(f"chunk-{chunk // MiB}")
                await write_sealed(store, path, size, chunk)
                runs = [await read_with_fetcher(store, path, chunk, request)
                        for _ in range(max(1, env.sizes.seq_repeats))]
            finally:
                await store.close()
            middle = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
            table.add(human(chunk), cost.puts, f"{cost.copy_parts} / {cost.upload_parts}",
                      human(cost.merge_upload_bytes), backend,
                      f"{median([mb_per_s(size, r.seconds) for r in runs]):.0f}",
                      middle.requests.get("get", 0))
    table.verdict(default >= 5 * MiB, f"default chunk size {human(default)}: full chunks "
                  "merge by UploadPartCopy (5 MiB or more)")
    table.notes.append("UploadPartCopy needs parts of at least 5 MiB: smaller chunks are read "
                       "and re-uploaded by the merge")
    return [table]
