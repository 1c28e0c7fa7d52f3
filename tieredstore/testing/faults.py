"""A fault-injecting ObjectStore wrapper, for chaos tests.

:class:`FaultyObjectStore` wraps any :class:`ObjectStore` and, on each attempt
of each request, lets a seeded :class:`FaultSchedule` decide whether to inject
a fault and which :class:`FaultKind`. Every operation runs through the
wrapper's *own* chokepoint, so an injected transient fault is retried (with
backoff, counted in :attr:`FaultyObjectStore.metrics`) exactly as a real one
would be. The inner store is called as it is; build it with a chokepoint whose
``RetryPolicy`` has ``max_attempts=1`` so that retries happen once, here::

    inner = MemoryObjectStore(chokepoint=Chokepoint(RetryPolicy(max_attempts=1)))
    store = FaultyObjectStore(inner, FaultSchedule(seed=7, rate=0.05))

Listings: the fault decision is made once per listing, at its start. One
attempt reads the inner listing whole, then its pages are yielded; a retried
attempt lists afresh. Errors the inner store raises are passed to the
wrapper's chokepoint unchanged (so real transient errors are retried too).

What is recorded of each fault is its operation, key (the prefix for
listings, the first key for deletes) and kind: never bodies, metadata, upload
ids or credentials. For one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from tieredstore.errors import ConfigError, RequestTimeout, ServerError, Throttled
from tieredstore.objectstore import ForwardingObjectStore
from tieredstore.objectstore.base import ObjectData, ObjectStore
from tieredstore.objectstore.chokepoint import Chokepoint
from tieredstore.tasks import Priority, current_priority

T = TypeVar("T")

log = logging.getLogger(__name__)

# The operation names, as the backends pass them to their chokepoints.
FAULT_OPS = frozenset({
    "put", "get", "head", "list", "delete", "create_multipart", "upload_part",
    "upload_part_copy", "complete_multipart", "abort_multipart", "list_multipart_uploads",
})
_OP_ALIASES = {"list_uploads": "list_multipart_uploads"}


class FaultKind(enum.Enum):
    """What goes wrong with one attempt of a request."""

    ERROR_BEFORE = "error_before"
    """A 5xx (``ServerError``) before the request reaches the store: nothing happened."""

    REPLY_LOST = "reply_lost"
    """The request reaches the store and takes effect, then its answer is lost
    (``RequestTimeout``). A retried conditional put then meets its own object
    (``PreconditionFailed``), a retried complete an unknown upload id."""

    SLOW_DOWN = "slow_down"
    """503 SlowDown (``Throttled``) before the request: nothing happened."""

    TIMEOUT = "timeout"
    """The request times out (``RequestTimeout``) before reaching the store,
    after ``timeout_delay`` seconds: nothing happened."""

    SHORT_READ = "short_read"
    """GET only: the body is cut short without an error (a truncated response);
    the object's info still gives its whole size. Callers must notice."""

    FLIP_BITS = "flip_bits"
    """GET only: one random bit of the body is flipped, the length is kept
    (corruption on the wire or at rest). Checksums must notice."""


BEFORE_KINDS = frozenset({FaultKind.ERROR_BEFORE, FaultKind.SLOW_DOWN, FaultKind.TIMEOUT})
DATA_KINDS = frozenset({FaultKind.SHORT_READ, FaultKind.FLIP_BITS})


@dataclass(frozen=True, slots=True)
class FaultSchedule:
    """Which attempts get which faults; reproducible from ``seed``.

    Each attempt of an operation in ``ops`` (every operation when None) gets a
    fault with probability ``rate``, its kind drawn evenly from those of
    ``kinds`` that fit the operation (``SHORT_READ`` and ``FLIP_BITS`` only fit
    ``get``). At most ``max_faults`` faults are injected in all (no limit when
    None). ``list_uploads`` is accepted for ``list_multipart_uploads``. With
    ``priorities``, only requests sent at one of those
    :class:`~tieredstore.tasks.Priority` values get faults (e.g. SlowDown to
    a share of the background work: ``kinds={SLOW_DOWN}``, ``priorities`` all
    but ``HOST``).
    """

    seed: int
    rate: float
    kinds: frozenset[FaultKind] = frozenset(FaultKind)
    ops: frozenset[str] | None = None
    max_faults: int | None = None
    priorities: frozenset[Priority] | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ConfigError("rate", f"must be in [0, 1], got {self.rate}")
        if self.max_faults is not None and self.max_faults < 0:
            raise ConfigError("max_faults", f"must be >= 0, got {self.max_faults}")
        kinds = frozenset(self.kinds)
        if not all(isinstance(k, FaultKind) for k in kinds):
            raise ConfigError("kinds", f"must be FaultKind members, got {sorted(map(str, kinds))}")
        object.__setattr__(self, "kinds", kinds)
        if self.ops is not None:
            ops = frozenset(_OP_ALIASES.get(op, op) for op in self.ops)
            unknown = ops - FAULT_OPS
            if unknown:
                raise ConfigError("ops", f"unknown operations {sorted(unknown)}")
            object.__setattr__(self, "ops", ops)
        if self.priorities is not None:
            priorities = frozenset(self.priorities)
            if not all(isinstance(p, Priority) for p in priorities):
                raise ConfigError("priorities", "must be Priority members, got "
                                                f"{sorted(map(str, priorities))}")
            object.__setattr__(self, "priorities", priorities)

    def kinds_for(self, op: str) -> tuple[FaultKind, ...]:
        """The kinds that may hit ``op`` sent now (at the running task's
        priority), in a fixed order (FaultKind's)."""
        if self.ops is not None and op not in self.ops:
            return ()
        if self.priorities is not None and current_priority() not in self.priorities:
            return ()
        return tuple(
            k for k in FaultKind if k in self.kinds and (op == "get" or k not in DATA_KINDS)
        )


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """One injected fault: which operation, on which key (or prefix), of what kind."""

    op: str
    key: str
    kind: FaultKind


class FaultyObjectStore(ForwardingObjectStore):
    """Wraps ``inner``; injects the faults ``schedule`` picks (see the module doc).

    Every request runs through :meth:`_forward`, on this store's own chokepoint,
    which also corrupts GET bodies. ``enabled`` switches injection off and on at
    run time. ``injected`` counts faults by (op, kind); ``log`` lists them in
    order. ``close`` closes the inner store.
    """

    def __init__(
        self,
        inner: ObjectStore,
        schedule: FaultSchedule,
        *,
        chokepoint: Chokepoint | None = None,
        timeout_delay: float = 0.0,
        enabled: bool = True,
    ) -> None:
        super().__init__(inner, close_inner=True, chokepoint=chokepoint or Chokepoint())
        if timeout_delay < 0:
            raise ConfigError("timeout_delay", f"must be >= 0, got {timeout_delay}")
        self.timeout_delay = timeout_delay
        self.enabled = enabled
        self.injected: Counter[tuple[str, FaultKind]] = Counter()
        self.log: list[InjectedFault] = []
        self.schedule = schedule
        self._rng = random.Random(schedule.seed)

    def reset(self, schedule: FaultSchedule | None = None) -> None:
        """Start over: reseed (with a new schedule, if given), forget past faults."""
        if schedule is not None:
            self.schedule = schedule
        self._rng = random.Random(self.schedule.seed)
        self.injected.clear()
        self.log.clear()

    # --- the schedule -------------------------------------------------------

    def _decide(self, op: str) -> FaultKind | None:
        limit = self.schedule.max_faults
        if not self.enabled or (limit is not None and len(self.log) >= limit):
            return None
        kinds = self.schedule.kinds_for(op)
        if not kinds or self._rng.random() >= self.schedule.rate:
            return None
        return self._rng.choice(kinds)

    def _record(self, op: str, key: str, kind: FaultKind) -> None:
        self.injected[(op, kind)] += 1
        self.log.append(InjectedFault(op, key, kind))
        log.debug("injecting %s into %s of %r", kind.value, op, key)

    async def _before(self, op: str, key: str) -> FaultKind | None:
        """Raise a fault due before the request; return one due after it."""
        kind = self._decide(op)
        if kind is None or kind not in BEFORE_KINDS:
            return kind
        self._record(op, key, kind)
        if kind is FaultKind.SLOW_DOWN:
            raise Throttled(f"injected 503 SlowDown on {op}", op=op, key=key)
        if kind is FaultKind.TIMEOUT:
            if self.timeout_delay > 0:
                await asyncio.sleep(self.timeout_delay)
            raise RequestTimeout(f"injected timeout of {op}", op=op, key=key)
        raise ServerError(f"injected 500 InternalError on {op}", op=op, key=key)

    def _after(self, op: str, key: str, kind: FaultKind | None) -> None:
        """Raise a lost reply, once the request has taken effect."""
        if kind is FaultKind.REPLY_LOST:
            self._record(op, key, kind)
            raise RequestTimeout(f"injected lost reply of {op} (it took effect)", op=op, key=key)

    def _corrupt(self, key: str, kind: FaultKind | None, found: ObjectData) -> ObjectData:
        data = found.data
        if kind is None or kind not in DATA_KINDS or not data:  # empty: nothing to cut or flip
            return found
        self._record("get", key, kind)
        if kind is FaultKind.SHORT_READ:
            return ObjectData(data[: self._rng.randrange(len(data))], found.info)
        bit = self._rng.randrange(len(data) * 8)
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        return ObjectData(bytes(flipped), found.info)

    async def _forward(
        self, op: str, key: str, call: Callable[[], Awaitable[T]], *, bytes_up: int = 0
    ) -> T:
        # docstring inherited
        async def attempt() -> T:
            kind = await self._before(op, key)
            result = await call()
            self._after(op, key, kind)
            if isinstance(result, ObjectData):  # a GET's body
                return cast(T, self._corrupt(key, kind, result))
            return result

        return await self.chokepoint.call(op, attempt, bytes_up=bytes_up, key=key)

