"""The one place every object-store request passes: timeouts, retries, metrics,
and the request governor.

Backends hand each request to :meth:`Chokepoint.call` as a zero-argument
coroutine factory that already translates backend errors into
:mod:`tieredstore.errors` types. The chokepoint then decides by type, never by
message text: ``TransientError`` (throttling, 5xx, timeouts, dropped
connections) is retried with capped, jittered exponential backoff; anything
else (a 404, a 412, a 400) is raised at once. With a
:class:`~tieredstore.objectstore.governor.Governor`, each attempt is first
admitted by it (budgets, priorities), and a ``Throttled`` answer cuts the
rate of its key's prefix; SlowDowns are counted by prefix and operation
either way.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tieredstore.errors import ConfigError, RequestTimeout, Throttled, TransientError, check_field
from tieredstore.objectstore.governor import Governor, GovernorOptions, key_prefix
from tieredstore.tasks import Priority

T = TypeVar("T")

# Upper bounds of the latency histogram buckets, in seconds.
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def observe(buckets: list[int], seconds: float) -> None:
    """Count ``seconds`` in its bucket of :data:`LATENCY_BUCKETS` (last: slower)."""
    for i, bound in enumerate(LATENCY_BUCKETS):
        if seconds <= bound:
            buckets[i] += 1
            return
    buckets[-1] += 1


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try. ``timeout`` bounds each attempt, not the whole call."""

    max_attempts: int = 6
    base_delay: float = 0.05
    max_delay: float = 2.0
    timeout: float = 30.0

    def __post_init__(self) -> None:
        check_field("retry_max_attempts", self.max_attempts, 1)
        check_field("retry_base_delay", self.base_delay, 0, self.max_delay,
                    bounds=f"[0, retry_max_delay={self.max_delay}]")
        if self.timeout <= 0:
            raise ConfigError("request_timeout", f"must be > 0 seconds, got {self.timeout}")

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Full-jitter backoff before retry number ``attempt`` (1-based)."""
        # The exponent is bounded: 2**1024 does not fit a float, and by 2**62 any
        # base delay is far past any sane max_delay.
        cap = min(self.max_delay, self.base_delay * (2 ** min(attempt - 1, 62)))
        return rng.uniform(0, cap)


class RequestMetrics:
    """Request, byte, retry and error counters by operation, plus latencies; the
    governor's waits and seconds waited by priority (lower-case name), and the
    SlowDowns by operation and key prefix (``"op:prefix"``).

    Thread-safe; :meth:`snapshot` returns plain dicts.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: defaultdict[str, int] = defaultdict(int)
        self.retries: defaultdict[str, int] = defaultdict(int)
        self.errors: defaultdict[str, int] = defaultdict(int)
        self.bytes_up: defaultdict[str, int] = defaultdict(int)
        self.bytes_down: defaultdict[str, int] = defaultdict(int)
        self.latency_buckets: defaultdict[str, list[int]] = defaultdict(
            lambda: [0] * (len(LATENCY_BUCKETS) + 1)
        )
        self.latency_sum: defaultdict[str, float] = defaultdict(float)
        self.waits: defaultdict[str, int] = defaultdict(int)
        self.wait_seconds: defaultdict[str, float] = defaultdict(float)
        self.slowdowns: defaultdict[str, int] = defaultdict(int)

    def record(
        self, op: str, seconds: float, *, up: int = 0, down: int = 0, error: str | None = None
    ) -> None:
        with self._lock:
            self.requests[op] += 1
            self.bytes_up[op] += up
            self.bytes_down[op] += down
            if error is not None:
                self.errors[f"{op}:{error}"] += 1
            self.latency_sum[op] += seconds
            observe(self.latency_buckets[op], seconds)

    def record_retry(self, op: str) -> None:
        with self._lock:
            self.retries[op] += 1

    def record_wait(self, priority: Priority, seconds: float) -> None:
        """A request the governor held back ``seconds`` before sending it."""
        name = priority.name.lower()
        with self._lock:
            self.waits[name] += 1
            self.wait_seconds[name] += seconds

    def record_slowdown(self, op: str, prefix: str) -> None:
        with self._lock:
            self.slowdowns[f"{op}:{prefix}"] += 1

    def total_requests(self, *ops: str) -> int:
        """Requests of the given operations, or of all when none is named."""
        with self._lock:
            return sum(n for op, n in self.requests.items() if not ops or op in ops)

    def snapshot(self) -> dict[str, dict[str, int | float]]:
        with self._lock:
            return {
                "requests": dict(self.requests),
                "retries": dict(self.retries),
                "errors": dict(self.errors),
                "bytes_up": dict(self.bytes_up),
                "bytes_down": dict(self.bytes_down),
                "latency_sum_seconds": dict(self.latency_sum),
                "waits": dict(self.waits),
                "wait_seconds": dict(self.wait_seconds),
                "slowdowns": dict(self.slowdowns),
            }

    def reset(self) -> None:
        with self._lock:
            for counter in (self.requests, self.retries, self.errors, self.bytes_up,
                            self.bytes_down, self.latency_buckets, self.latency_sum,
                            self.waits, self.wait_seconds, self.slowdowns):
                counter.clear()


def _size(value: object) -> int:
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    data = getattr(value, "data", None)  # ObjectData
    return len(data) if isinstance(data, bytes | memoryview) else 0


class Chokepoint:
    """Runs one logical request: attempts with timeouts, retries, metrics; each
    attempt admitted by the governor that ``governor`` options build (none
    without options, or if they ask for nothing: :attr:`GovernorOptions.enabled`)."""

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        metrics: RequestMetrics | None = None,
        *,
        seed: int | None = None,
        governor: GovernorOptions | None = None,
    ) -> None:
        self.policy = policy or RetryPolicy()
        self.metrics = metrics or RequestMetrics()
        self._rng = random.Random(seed)
        self.governor_options = governor
        self._prefix_depth = (governor or GovernorOptions()).prefix_depth
        self.governor: Governor | None = None
        if governor is not None and governor.enabled:
            self.governor = Governor(governor, on_wait=self.metrics.record_wait)

    async def call(
        self, op: str, attempt: Callable[[], Awaitable[T]], *, bytes_up: int = 0,
        key: str = "",
    ) -> T:
        """Run ``attempt()`` until it succeeds, fails for good, or retries run out.
        ``key`` (a listing's prefix, a delete's first key) places it for the governor."""
        governor = self.governor
        tries = 0
        while True:
            tries += 1
            if governor is not None and governor.limiting:
                await governor.admit(op, key)
            started = time.perf_counter()
            try:
                async with asyncio.timeout(self.policy.timeout):
                    result = await attempt()
            except TimeoutError as exc:
                elapsed = time.perf_counter() - started
                self.metrics.record(op, elapsed, up=bytes_up, error="timeout")
                error: Exception = (
                    exc
                    if isinstance(exc, RequestTimeout)
                    else RequestTimeout(f"{op} timed out after {self.policy.timeout}s", op=op)
                )
            except TransientError as exc:
                self.metrics.record(
                    op, time.perf_counter() - started, up=bytes_up, error=type(exc).__name__
                )
                if isinstance(exc, Throttled):
                    self._slowed(op, key or exc.key)
                error = exc
            except Exception as exc:
                self.metrics.record(
                    op, time.perf_counter() - started, up=bytes_up, error=type(exc).__name__
                )
                raise
            else:
                self.metrics.record(
                    op, time.perf_counter() - started, up=bytes_up, down=_size(result)
                )
                return result
            if tries >= self.policy.max_attempts:
                raise error
            self.metrics.record_retry(op)
            await asyncio.sleep(self.policy.delay(tries, self._rng))

    def _slowed(self, op: str, key: str) -> None:
        self.metrics.record_slowdown(op, key_prefix(key, self._prefix_depth))
        if self.governor is not None:
            self.governor.slowed(op, key)
