"""Child process of the memory benchmark: many queues, one pool, peak RSS.

``python -m bench.segment.rss_child --queues 1000 --bytes-per-queue N --pool-bytes B
(--endpoint URL --bucket NAME | --local DIR)`` prints one JSON line: RSS once
every segment is open (before the first append), peak RSS while appending
and flushing (sampled every 2 ms, and the kernel's own mark, VmHWM, reset
just before), the pool's peak bytes, throughput and requests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import threading
import time
from collections.abc import Sequence

import psutil

from bench.segment.write import append_all
from tests.servers import ACCESS_KEY, SECRET_KEY
from tieredstore.config import TieredStoreConfig
from tieredstore.objectstore import LocalObjectStore, ObjectStore, S3ObjectStore, S3Settings
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.segment.pool import UploadBufferPool
from tieredstore.store import pool_options


class PeakSampler:
    """The largest RSS seen, sampled from a daemon thread."""

    def __init__(self, interval: float = 0.002) -> None:
        self._process = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.peak = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            self._stop.wait(self._interval)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def peak_rss() -> int | None:
    """The kernel's peak RSS of this process (VmHWM), in bytes, where there is one.

    Unlike getrusage's ru_maxrss, it belongs to this process's memory alone: it is
    not inherited from the parent across fork and exec.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def open_store(args: argparse.Namespace) -> ObjectStore:
    if args.local:
        return LocalObjectStore(args.local, fsync=TieredStoreConfig().local_fsync)
    return S3ObjectStore(S3Settings(
        bucket=args.bucket, endpoint_url=args.endpoint, region="us-east-1",
        addressing_style="path", access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY))


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    store = open_store(args)
    if isinstance(store, S3ObjectStore):
        await store.create_bucket()
    options = SegmentOptions(chunk_size=args.chunk_size)
    segments = [
        await ChunkedSegment.open(
            store, SegmentPath("bench", "broker-0", "rss", q, FileType.COMMIT_LOG, 0),
            options=options)
        for q in range(args.queues)
    ]
    defaults = TieredStoreConfig()
    config = defaults.replace(chunk_size=args.chunk_size, pool_bytes=args.pool_bytes,
                              max_message_size=min(defaults.max_message_size, args.pool_bytes))
    pool = UploadBufferPool(pool_options(config))
    # Warm the code paths the appends use (imports, first PUT, client buffers) on a
    # queue of its own, so that one-off allocations do not count as growth.
    warm = await ChunkedSegment.open(
        store, SegmentPath("bench", "broker-0", "rss-warm", 0, FileType.COMMIT_LOG, 0),
        options=options)
    await append_all(pool, [warm], args.message, args.message)
    store.metrics.reset()
    gc.collect()
    hwm_reset = reset_peak_rss()
    rss_before = psutil.Process().memory_info().rss
    with PeakSampler() as sampler:
        started = time.perf_counter()
        await append_all(pool, segments, args.bytes_per_queue, args.message)
        seconds = time.perf_counter() - started
    hwm = peak_rss() if hwm_reset else None
    snapshot = pool.snapshot()
    requests = {op: n for op, n in store.metrics.requests.items() if n}
    await pool.close()
    await store.close()
    total = args.queues * args.bytes_per_queue
    return {
        "rss_before": rss_before,
        "peak_rss": sampler.peak,
        # The kernel's mark cannot miss a spike shorter than the sampling interval.
        "peak_rss_kernel": hwm,
        "pool_peak_bytes": snapshot["peak_bytes_in_use"],
        "commits": snapshot["commits"],
        "seconds": seconds,
        "mb_per_s": total / seconds / 1e6,
        "requests": requests,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.segment.rss_child")
    parser.add_argument("--queues", type=int, required=True)
    parser.add_argument("--bytes-per-queue", type=int, required=True)
    parser.add_argument("--message", type=int, required=True)
    parser.add_argument("--chunk-size", type=int, required=True)
    parser.add_argument("--pool-bytes", type=int, required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--local", metavar="DIR")
    where.add_argument("--endpoint", metavar="URL")
    parser.add_argument("--bucket", default="bench-rss")
    args = parser.parse_args(argv)
    result = asyncio.run(main_async(args))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
