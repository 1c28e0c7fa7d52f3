"""Helpers for segment tests."""

from __future__ import annotations

import random

from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath

KiB = 1024
MiB = 1024 * KiB


def seg_path(topic: str = "t", base: int = 0, queue: int = 0) -> SegmentPath:
    return SegmentPath("c", "b", topic, queue, FileType.COMMIT_LOG, base, prefix="ts")


def payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


async def open_segment(store: ObjectStore, chunk_size: int = 64 * KiB, **kw: object
                       ) -> ChunkedSegment:
    options = SegmentOptions(chunk_size=chunk_size, **kw)  # type: ignore[arg-type]
    return await ChunkedSegment.open(store, seg_path(), options=options)


async def keys(store: ObjectStore, prefix: str = "") -> list[str]:
    return [o.key.rsplit("/", 1)[1] for o in await store.list_all(prefix)]
