"""Counters of the upload buffer pool, and their plain-dict snapshot."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tieredstore.objectstore.chokepoint import LATENCY_BUCKETS, observe

# What made bytes due for commit (see UploadBufferPool).
TRIGGERS = ("chunk", "interval", "room", "flush")


class PoolMetrics:
    """Pool bytes, waits, commits and failures. Updated on the pool's event loop.

    ``commit_latency`` counts commits per bucket of :data:`LATENCY_BUCKETS`
    (upper bounds in seconds), the last bucket being everything slower.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.bytes_in_use = 0
        self.peak_bytes_in_use = 0
        self.bytes_appended = 0
        self.appends = 0
        self.waits = 0
        self.wait_seconds = 0.0
        self.buffer_full = 0
        self.commits = 0
        self.bytes_committed = 0
        self.commit_seconds = 0.0
        self.commit_latency = [0] * (len(LATENCY_BUCKETS) + 1)
        self.retries = 0
        self.commit_errors: defaultdict[str, int] = defaultdict(int)
        self.segment_errors: defaultdict[str, int] = defaultdict(int)
        self.scheduled_by: dict[str, int] = dict.fromkeys(TRIGGERS, 0)
        self.waited_for_chunk = 0  # group commits a segment sat out (``chunk_wait``)

    def in_use(self, value: int) -> None:
        self.bytes_in_use = value
        self.peak_bytes_in_use = max(self.peak_bytes_in_use, value)

    def commit(self, seconds: float, nbytes: int) -> None:
        self.commits += 1
        self.bytes_committed += nbytes
        self.commit_seconds += seconds
        observe(self.commit_latency, seconds)

    def snapshot(self) -> dict[str, Any]:
        buckets = {f"le_{bound:g}": n for bound, n in zip(LATENCY_BUCKETS, self.commit_latency,
                                                          strict=False)}
        buckets["le_inf"] = self.commit_latency[-1]
        return {
            "budget_bytes": self.budget_bytes,
            "bytes_in_use": self.bytes_in_use,
            "peak_bytes_in_use": self.peak_bytes_in_use,
            "appends": self.appends,
            "bytes_appended": self.bytes_appended,
            "waits": self.waits,
            "wait_seconds": self.wait_seconds,
            "buffer_full": self.buffer_full,
            "commits": self.commits,
            "bytes_committed": self.bytes_committed,
            "commit_seconds_sum": self.commit_seconds,
            "commit_latency": buckets,
            "retries": self.retries,
            "commit_errors": dict(self.commit_errors),
            "segment_errors": dict(self.segment_errors),
            "scheduled_by": dict(self.scheduled_by),
            "waited_for_chunk": self.waited_for_chunk,
        }
