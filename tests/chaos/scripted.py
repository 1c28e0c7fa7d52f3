"""A fault store whose faults are scripted, for deterministic reproductions.

:class:`Scripted` is a :class:`FaultyObjectStore` with no random schedule:
``script(op, match, *kinds)`` makes the next attempts of ``op`` on a key
containing ``match`` get those faults, one per attempt, in order. A fault has
the same effect as in the chaos runs (a lost reply lands first, a flipped bit
keeps the length), and the store's own chokepoint retries transient faults
(4 attempts, no backoff). ``flip(match, mutate)`` corrupts the next GET of a
matching key with a chosen change of bytes. ``hold(op, match)`` stops the
``nth`` matching attempt before it reaches the bucket until ``go`` is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from tieredstore.errors import RequestTimeout, ServerError, Throttled
from tieredstore.objectstore import Chokepoint, MemoryObjectStore, ObjectData, RetryPolicy
from tieredstore.testing import FaultKind, FaultSchedule, FaultyObjectStore


@dataclass
class Rule:
    op: str
    match: str
    kinds: list[FaultKind]
    mutate: Callable[[bytes], bytes] | None = None


@dataclass
class Hold:
    op: str
    match: str
    nth: int = 1
    seen: int = 0
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    go: asyncio.Event = field(default_factory=asyncio.Event)
    armed: bool = True


class Scripted(FaultyObjectStore):
    """Faults exactly where the test says (see the module doc)."""

    def __init__(self, inner: MemoryObjectStore | None = None, *, attempts: int = 4) -> None:
        super().__init__(
            inner or MemoryObjectStore(chokepoint=Chokepoint(RetryPolicy(max_attempts=1))),
            FaultSchedule(seed=0, rate=0.0),
            chokepoint=Chokepoint(RetryPolicy(max_attempts=attempts, base_delay=0.0,
                                              max_delay=0.0, timeout=10.0), seed=0),
        )
        self.rules: list[Rule] = []
        self.holds: list[Hold] = []
        self._mutate: Callable[[bytes], bytes] | None = None

    def script(self, op: str, match: str, *kinds: FaultKind) -> None:
        self.rules.append(Rule(op, match, list(kinds)))

    def flip(self, match: str, mutate: Callable[[bytes], bytes]) -> None:
        """The next GET of a key containing ``match`` returns ``mutate(bytes)``."""
        self.rules.append(Rule("get", match, [FaultKind.FLIP_BITS], mutate))

    def hold(self, op: str, match: str, nth: int = 1) -> Hold:
        """Stop the ``nth`` matching attempt (counting from now) until ``go`` is set."""
        held = Hold(op, match, nth)
        self.holds.append(held)
        return held

    @property
    def pending(self) -> list[str]:
        """Scripted faults that never fired."""
        return [f"{r.op} {r.match} {k.value}" for r in self.rules for k in r.kinds]

    async def _before(self, op: str, key: str) -> FaultKind | None:
        for held in self.holds:
            if held.armed and held.op == op and held.match in key:
                held.seen += 1
                if held.seen < held.nth:
                    continue
                held.armed = False
                held.reached.set()
                await held.go.wait()
        kind = None
        self._mutate = None
        if self.enabled:
            for rule in self.rules:
                if rule.op == op and rule.match in key and rule.kinds:
                    kind = rule.kinds.pop(0)
                    self._mutate = rule.mutate
                    break
        if kind is None or kind in (FaultKind.REPLY_LOST, FaultKind.SHORT_READ,
                                    FaultKind.FLIP_BITS):
            return kind
        self._record(op, key, kind)
        if kind is FaultKind.SLOW_DOWN:
            raise Throttled(f"scripted 503 SlowDown on {op}", op=op, key=key)
        if kind is FaultKind.TIMEOUT:
            raise RequestTimeout(f"scripted timeout of {op}", op=op, key=key)
        raise ServerError(f"scripted 500 InternalError on {op}", op=op, key=key)

    def _corrupt(self, key: str, kind: FaultKind | None, found: ObjectData) -> ObjectData:
        mutate, self._mutate = self._mutate, None
        if mutate is None or kind is not FaultKind.FLIP_BITS:
            return super()._corrupt(key, kind, found)
        self._record("get", key, kind)
        return ObjectData(mutate(found.data), found.info)


def flip_bit(index: int, bit: int = 0) -> Callable[[bytes], bytes]:
    """Flip one bit of byte ``index`` (negative counts from the end)."""

    def mutate(data: bytes) -> bytes:
        out = bytearray(data)
        out[index] ^= 1 << bit
        return bytes(out)

    return mutate
