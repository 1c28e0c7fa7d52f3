"""Segments for the read benchmarks: written, sealed, and opened cold."""

from __future__ import annotations

import os
from typing import Any

from bench.common import DEFAULTS, WireCounter
from tieredstore.checksum import crc32c
from tieredstore.fetcher import Fetcher
from tieredstore.objectstore import ObjectStore, S3ObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.store import open_fetcher


def bench_path(topic: str, queue: int = 0) -> SegmentPath:
    return SegmentPath("bench", "broker-0", topic, queue, FileType.COMMIT_LOG, 0)


async def write_sealed(store: ObjectStore, path: SegmentPath, size: int, chunk_size: int
                       ) -> tuple[ChunkedSegment, int]:
    """Commit ``size`` random bytes in ``chunk_size`` chunks, then seal and merge.

    Returns the segment and the CRC32C of its bytes.
    """
    segment = await ChunkedSegment.open(store, path, options=SegmentOptions(chunk_size=chunk_size))
    block = os.urandom(chunk_size)
    crc = 0
    # Every chunk differs (a server that deduplicates or compresses gains nothing).
    for position in range(0, size, chunk_size):
        n = min(chunk_size, size - position)
        data = position.to_bytes(8, "big") + block[8:n]
        crc = crc32c(data, crc)
        await segment.commit0(position, data)
    await segment.seal()
    return segment, crc


def default_fetcher(store: ObjectStore, memory_bytes: int | None = None) -> Fetcher:
    """A fetcher as the shipped configuration builds it (no disk tier by default)."""
    config = DEFAULTS if memory_bytes is None else DEFAULTS.replace(
        memory_cache_bytes=memory_bytes)
    return open_fetcher(store, config)


async def open_cold(store: ObjectStore, path: SegmentPath, chunk_size: int, *,
                    memory_bytes: int | None = None) -> tuple[ChunkedSegment, Fetcher]:
    """The segment as a freshly started reader sees it: new fetcher, nothing cached."""
    fetcher = default_fetcher(store, memory_bytes)
    segment = await ChunkedSegment.open(store, path, options=SegmentOptions(chunk_size=chunk_size),
                                        reader=fetcher)
    return segment, fetcher


async def wire_counter(store: ObjectStore) -> WireCounter | None:
    """Count the HTTP requests of an S3 store's own client (None for other backends).

    The store's client is private; the benchmark reaches in so that request
    counts come from the wire, not from the store's own metrics.
    """
    if not isinstance(store, S3ObjectStore):
        return None
    client: Any = await store._get_client()
    counter = WireCounter()
    counter.attach(client)
    return counter


def request_counts(store: ObjectStore, wire: WireCounter | None) -> dict[str, int]:
    """Requests since the last reset: from the wire for S3, from the store's metrics
    otherwise. A disagreement between the two is a bug in our metrics: raised."""
    ours = {op: n for op, n in store.metrics.requests.items() if n}
    if wire is None:
        return ours
    seen = {_OPS.get(op, op): n for op, n in wire.counts.items() if n}
    if seen != ours:
        raise AssertionError(f"store metrics {ours} disagree with the wire {seen}")
    return seen


def reset_counts(store: ObjectStore, wire: WireCounter | None) -> None:
    store.metrics.reset()
    if wire is not None:
        wire.reset()


# botocore operation names -> the chokepoint's names.
_OPS = {
    "GetObject": "get", "PutObject": "put", "HeadObject": "head", "ListObjectsV2": "list",
    "DeleteObjects": "delete", "CreateMultipartUpload": "create_multipart",
    "UploadPart": "upload_part", "UploadPartCopy": "upload_part_copy",
    "CompleteMultipartUpload": "complete_multipart", "AbortMultipartUpload": "abort_multipart",
    "ListMultipartUploads": "list_multipart_uploads",
}
