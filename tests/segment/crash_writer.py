"""A writer process for the crash test: commits, reports, seals; killed at random.

Prints ``C <end>`` after each commit returns (flushed at once), ``S`` when the
seal begins and ``D`` when it is done. The parent kills it with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

from tests.segment.helpers import seg_path
from tieredstore.objectstore import LocalObjectStore, ObjectStore, S3ObjectStore, S3Settings
from tieredstore.segment import ChunkedSegment, SegmentOptions

KiB = 1024


def plan(seed: int) -> list[bytes]:
    """The commits a seed writes: deterministic, so the parent can rebuild them."""
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(1, 700 * KiB)) for _ in range(40)]


def make_store(spec: dict[str, str]) -> ObjectStore:
    if spec["backend"] == "local":
        return LocalObjectStore(spec["root"], fsync=True)
    return S3ObjectStore(S3Settings(
        bucket=spec["bucket"], endpoint_url=spec["endpoint"], region="us-east-1",
        addressing_style="path", access_key_id="x", secret_access_key="y"))


async def main(spec: dict[str, str], seed: int, seal: bool) -> None:
    store = make_store(spec)
    options = SegmentOptions(chunk_size=256 * KiB)
    segment = await ChunkedSegment.open(store, seg_path(), options=options)
    position = segment.commit_position
    for data in plan(seed):
        await segment.commit0(position, data)
        position += len(data)
        print(f"C {position}", flush=True)
    if seal:
        print("S", flush=True)
        await segment.seal()
        print("D", flush=True)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "seal"))
