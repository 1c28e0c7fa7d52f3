"""What every benchmark shares: sizes, backends, request counting, tables.

A benchmark is an async function ``run(env) -> list[Table]``. ``env`` (a
:class:`BenchEnv`) says how big to go (:class:`Sizes`) and hands out fresh
stores: a new bucket on the SeaweedFS server started for the run, or a new
directory for the local backend.
"""

from __future__ import annotations

import gc
import itertools
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server
from tieredstore.config import TieredStoreConfig
from tieredstore.objectstore import LocalObjectStore, ObjectStore, S3ObjectStore, S3Settings

KiB = 1024
MiB = 1024 * KiB

REGION = "us-east-1"
SEAWEEDFS = "seaweedfs"
LOCAL = "local"
BACKENDS = (SEAWEEDFS, LOCAL)

# The library's defaults: every benchmark runs the shipped configuration.
DEFAULTS = TieredStoreConfig()


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big each benchmark goes. ``full`` is what BENCHMARKS.md reports."""

    name: str
    seq_segment: int  # bytes of the catch-up segment
    seq_request: int  # bytes a consumer asks for at a time
    seq_repeats: int  # runs of each reader; the median is reported
    tail_commits: int  # small commits read back right after
    tail_commit_size: int
    random_misses: int  # 4 KiB reads in units not yet cached (at most one per unit)
    random_hits: int
    write_queues: int
    write_bytes_per_queue: int
    write_message: int
    write_repeats: int
    rss_queues: int
    rss_bytes_per_queue: int
    rss_pool: int
    chunk_size: int = 4 * MiB
    segment_cost: bool = True  # the 1 GiB segment-cost table (in-memory, a few seconds)
    quiet_queues: int = 1000  # queues at 1 message/s each
    quiet_seconds: float = 30.0  # steady state measured, after a quarter as long to warm up
    bill_queues: int = 10_000  # the hourly bill's quiet queues (log mode)
    bill_rate: float = 1000.0  # their messages a second, all together
    busy_queues: int = 64  # queues written at full speed
    busy_bytes_per_queue: int = 16 * MiB
    busy_segment: int = 16 * MiB  # commit-log segment size, so that every queue seals
    flushing_segment: int = 1024 * MiB  # the flushing producer's segment (the default size)


FULL = Sizes(
    name="full", seq_segment=256 * MiB, seq_request=1 * MiB, seq_repeats=5,
    tail_commits=1000, tail_commit_size=16 * KiB,
    random_misses=64, random_hits=2000,
    write_queues=64, write_bytes_per_queue=8 * MiB, write_message=4 * KiB, write_repeats=3,
    rss_queues=1000, rss_bytes_per_queue=256 * KiB, rss_pool=64 * MiB,
)
QUICK = Sizes(
    name="quick", seq_segment=64 * MiB, seq_request=1 * MiB, seq_repeats=1,
    tail_commits=200, tail_commit_size=16 * KiB,
    random_misses=16, random_hits=500,
    write_queues=64, write_bytes_per_queue=2 * MiB, write_message=4 * KiB, write_repeats=1,
    rss_queues=1000, rss_bytes_per_queue=64 * KiB, rss_pool=64 * MiB, quiet_seconds=15.0,
    busy_bytes_per_queue=8 * MiB, busy_segment=8 * MiB,
)
# For the smoke test: every code path, seconds in all.
TINY = Sizes(
    name="tiny", seq_segment=2 * MiB, seq_request=64 * KiB, seq_repeats=1,
    tail_commits=20, tail_commit_size=4 * KiB,
    random_misses=4, random_hits=20,
    write_queues=4, write_bytes_per_queue=256 * KiB, write_message=4 * KiB, write_repeats=1,
    rss_queues=20, rss_bytes_per_queue=64 * KiB, rss_pool=256 * KiB,
    chunk_size=256 * KiB, segment_cost=False, quiet_queues=20, quiet_seconds=2.0,
    bill_queues=40, bill_rate=20.0,
    busy_queues=4, busy_bytes_per_queue=1 * MiB, busy_segment=512 * KiB,
    flushing_segment=16 * MiB,
)


@dataclass
class Table:
    """One benchmark's results: a title, what it aims for, rows of figures."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    goal: str = ""
    notes: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)  # the goal, checked against the rows

    def verdict(self, met: bool, what: str) -> None:
        self.verdicts.append(f"{'MET' if met else 'MISSED'}: {what}")

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([str(c) for c in cells])

    def text(self) -> str:
        """Aligned plain text, for the terminal."""
        widths = [max(len(c), *(len(r[i]) for r in self.rows)) if self.rows else len(c)
                  for i, c in enumerate(self.columns)]
        lines = [f"== {self.title} =="]
        if self.goal:
            lines.append(f"goal: {self.goal}")
        lines.extend(f"  {v}" for v in self.verdicts)
        lines.append("  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True)))
        lines.append("  ".join("-" * w for w in widths))
        lines.extend("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                     for r in self.rows)
        lines.extend(f"  * {n}" for n in self.notes)
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        if self.goal:
            lines += [f"Goal: {self.goal}", ""]
        if self.verdicts:
            lines += [*(f"- **{v}**" for v in self.verdicts), ""]
        lines.append("| " + " | ".join(self.columns) + " |")
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        lines.extend("| " + " | ".join(r) + " |" for r in self.rows)
        if self.notes:
            lines.append("")
            lines.extend(f"- {n}" for n in self.notes)
        return "\n".join(lines)


@dataclass
class BenchEnv:
    """Sizes, the backends to run on, and fresh stores for each benchmark."""

    sizes: Sizes
    backends: Sequence[str]
    workdir: Path
    s3: S3Server | None = None
    _count: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def s3_settings(self, bucket: str) -> S3Settings:
        assert self.s3 is not None, "no S3 server in this run"
        return S3Settings(
            bucket=bucket, endpoint_url=self.s3.endpoint_url, region=REGION,
            addressing_style="path", access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY,
            max_pool_connections=DEFAULTS.s3_max_pool_connections,
        )

    async def store(self, backend: str, name: str) -> ObjectStore:
        """A store on a fresh bucket or directory, named after the benchmark."""
        n = next(self._count)
        if backend == SEAWEEDFS:
            store = S3ObjectStore(self.s3_settings(f"bench-{name}-{os.getpid()}-{n}"))
            await store.create_bucket()
            # SeaweedFS grows volumes for a bucket on its first write, stalling it for
            # about a second: pay that here, not inside a measurement.
            await store.put("warm-up", b"x")
            await store.delete("warm-up")
            store.metrics.reset()
            return store
        if backend == LOCAL:
            # fsync as shipped (local_fsync = true): the durability the library promises.
            return LocalObjectStore(self.workdir / f"{name}-{n}", fsync=DEFAULTS.local_fsync)
        raise ValueError(f"unknown backend {backend!r}")


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="tieredstore-bench-"))


class WireCounter:
    """Counts HTTP requests a botocore/aiobotocore client sends, by operation.

    Hooked on ``before-send``, which botocore emits once per HTTP attempt
    (retries included), so it counts what S3 would bill, whatever the server.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-send.s3", self._on_send)

    def _on_send(self, event_name: str = "", **_: Any) -> None:
        self.counts[event_name.rsplit(".", 1)[-1]] += 1

    def reset(self) -> None:
        self.counts.clear()

    def total(self) -> int:
        return sum(self.counts.values())


# --- figures ----------------------------------------------------------------------


def start_clock() -> float:
    """``time.perf_counter()`` once the garbage collector has run: a collection
    that an earlier run's garbage made due falls before the clock starts, not
    in whichever timed run comes next (timeit turns the collector off for the
    same reason). Readers compared in one table each start this way."""
    gc.collect()
    return time.perf_counter()


def percentile(samples: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) by linear interpolation."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ms(seconds: float) -> str:
    """Seconds as milliseconds, with precision where it matters."""
    value = seconds * 1000
    if value < 0.1:
        return f"{value:.3f}"
    if value < 10:
        return f"{value:.2f}"
    return f"{value:.1f}"


def mb_per_s(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e6 if seconds > 0 else float("inf")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def requests_text(counts: dict[str, int]) -> str:
    """``get 64, head 1`` (zero counts left out), or ``0``."""
    shown = [f"{op} {n}" for op, n in sorted(counts.items()) if n]
    return ", ".join(shown) or "0"


def human(nbytes: int) -> str:
    if nbytes >= MiB and nbytes % MiB == 0:
        return f"{nbytes // MiB} MiB"
    if nbytes >= KiB and nbytes % KiB == 0:
        return f"{nbytes // KiB} KiB"
    return f"{nbytes} B"
