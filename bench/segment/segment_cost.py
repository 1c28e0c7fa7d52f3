"""What a 1 GiB segment costs in S3 requests, at 4 MiB and at 8 MiB chunks.

Counts are exact (they do not depend on the machine): the segment is written
through ChunkedSegment on the in-memory store, whose chokepoint counts every
request the S3 backend would make. Reported: PUTs to write it, the merge's
part copies and uploads, bytes the merge read and re-uploaded, and the
requests to recover it (open after a restart) before and after the merge.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from bench.common import BenchEnv, Table
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.segment.reader import DirectReader

MiB = 1024 * 1024


@dataclass
class SegmentCost:
    chunk_mib: int
    puts: int
    merge_requests: dict[str, int]
    copy_parts: int
    upload_parts: int
    merge_read_bytes: int
    merge_upload_bytes: int
    recover_open: dict[str, int]
    recover_sealed: dict[str, int]


async def measure(chunk_size: int, segment_size: int = 1024 * MiB) -> SegmentCost:
    store = MemoryObjectStore()
    path = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0)
    # A reader without cache: the merge's reads are what a restarted process pays.
    options = SegmentOptions(chunk_size=chunk_size)
    segment = ChunkedSegment(store, path, options=options, reader=DirectReader(store))
    block = os.urandom(chunk_size)
    for position in range(0, segment_size, chunk_size):
        await segment.commit0(position, block[: min(chunk_size, segment_size - position)])
    puts = store.metrics.requests["put"]

    store.metrics.reset()
    await ChunkedSegment.open(store, path, options=options)
    recover_open = dict(store.metrics.requests)

    store.metrics.reset()
    await segment.seal()
    merge = dict(store.metrics.requests)
    merge_read = store.metrics.bytes_down.get("get", 0)
    stats = segment.last_merge
    assert stats is not None

    store.metrics.reset()
    await ChunkedSegment.open(store, path, options=options)
    recover_sealed = dict(store.metrics.requests)
    return SegmentCost(
        chunk_mib=chunk_size // MiB,
        puts=puts,
        merge_requests=merge,
        copy_parts=stats.copy_parts,
        upload_parts=stats.upload_parts,
        merge_read_bytes=merge_read,
        merge_upload_bytes=stats.bytes_reuploaded,
        recover_open=recover_open,
        recover_sealed=recover_sealed,
    )


def fmt(requests: dict[str, int]) -> str:
    return ", ".join(f"{op} {n}" for op, n in sorted(requests.items())) or "none"


async def run() -> list[dict[str, str]]:
    rows = []
    for chunk in (4 * MiB, 8 * MiB):
        cost = await measure(chunk)
        rows.append({
            "chunk size": f"{cost.chunk_mib} MiB",
            "PUTs to write 1 GiB": str(cost.puts),
            "merge requests": fmt(cost.merge_requests),
            "part copies / uploads": f"{cost.copy_parts} / {cost.upload_parts}",
            "merge bytes read / re-uploaded":
                f"{cost.merge_read_bytes // MiB} / {cost.merge_upload_bytes // MiB} MiB",
            "recover (open segment)": fmt(cost.recover_open),
            "recover (sealed segment)": fmt(cost.recover_sealed),
        })
    return rows


async def run_tables(env: BenchEnv) -> list[Table]:
    """The cost table, for ``python -m bench`` (exact counts: the same at every size)."""
    if not env.sizes.segment_cost:
        return []
    rows = await run()
    table = Table("Request cost of a 1 GiB segment (exact counts, in-memory store)",
                  list(rows[0]), goal="(reference) what S3 bills to write, seal and recover "
                  "a segment at 4 and 8 MiB chunks")
    for row in rows:
        table.add(*row.values())
    table.notes.append(
        "chunks under 5 MiB cannot be copied part by part (S3's minimum part size), so the "
        "merge reads and re-uploads them; from 5 MiB the merge copies server-side"
    )
    return [table]


if __name__ == "__main__":
    for row in asyncio.run(run()):
        print(row)
