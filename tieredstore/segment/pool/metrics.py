"""Counters of the upload buffer pool, and their plain-dict snapshot."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, fields
from typing import Any

from tieredstore.objectstore.chokepoint import LATENCY_BUCKETS, observe

# What made bytes due for commit (see UploadBufferPool).
TRIGGERS = ("chunk", "interval", "room", "flush")


def _by_kind() -> defaultdict[str, int]:
    return defaultdict(int)


@dataclass(slots=True)
class PoolMetrics:
    """Pool bytes, waits, commits and failures. Updated on the pool's event loop.

    ``commit_latency`` counts commits per bucket of :data:`LATENCY_BUCKETS`
    (upper bounds in seconds), the last bucket being everything slower.
    """

    budget_bytes: int
    bytes_in_use: int = 0  # admitted and not yet committed: now, and the most at once
    peak_bytes_in_use: int = 0
    bytes_appended: int = 0
    appends: int = 0
    # What made appended bytes due (:data:`TRIGGERS`).
    scheduled_by: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TRIGGERS, 0))
    # Appends that waited for room, and for how long; appends refused (``try_append``);
    # group commits a segment sat out waiting for a full chunk (``chunk_wait``).
    waits: int = 0
    wait_seconds: float = 0.0
    buffer_full: int = 0
    waited_for_chunk: int = 0
    # Commits that landed: by latency bucket, how many, their bytes and seconds.
    commit_latency: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    commits: int = 0
    bytes_committed: int = 0
    commit_seconds: float = 0.0
    # Failed commits sent again; failures by error type, of commits and of segments.
    retries: int = 0
    commit_errors: defaultdict[str, int] = field(default_factory=_by_kind)
    segment_errors: defaultdict[str, int] = field(default_factory=_by_kind)

    def in_use(self, value: int) -> None:
        self.bytes_in_use = value
        self.peak_bytes_in_use = max(self.peak_bytes_in_use, value)

    def commit(self, seconds: float, nbytes: int) -> None:
        self.commits += 1
        self.bytes_committed += nbytes
        self.commit_seconds += seconds
        observe(self.commit_latency, seconds)

    def snapshot(self) -> dict[str, Any]:
        """Every counter by name (counts by kind as plain dicts; ``commit_seconds``
        as ``commit_seconds_sum``), the commit latency by bucket (``le_{bound}``)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("commit_errors", "segment_errors", "scheduled_by"):
            out[name] = dict(out[name])
        out["commit_seconds_sum"] = out.pop("commit_seconds")
        bounds = [f"le_{bound:g}" for bound in LATENCY_BUCKETS] + ["le_inf"]
        out["commit_latency"] = dict(zip(bounds, self.commit_latency, strict=True))
        return out
