"""Liveness records: who writes, and when it was last seen (docs/writers.md,
Liveness records).

A writer (a message store's open, a managed ledger's owner) keeps one small
JSON record under a prefix of its own (:func:`start`), overwritten with a
plain PUT at the open, every ``interval`` seconds (:meth:`Heartbeat.beat`,
driven by the owner's :class:`~tieredstore.tasks.Background`) and once at a
clean close. Record keys sort by the wall clock of the open, so the newest
opener's record is the last listed (:func:`newest`); of the records before
it, only the newest is kept.

Liveness informs, it never decides: nothing reads a record to choose a write
or a delete. Fencing stays the arbiter of who may write.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from tieredstore.errors import ObjectNotFound, TieredStoreError
from tieredstore.objectstore.base import ObjectStore

log = logging.getLogger(__name__)

RECORD_PREFIX = "live-"
STALE_INTERVALS = 3  # a record is stale after this many missed refreshes...
STALE_SLACK = 5.0  # ...and these seconds more (a slow PUT, clocks a little apart)


class WriterLive(TieredStoreError):
    """Another writer is live where this open would take over (``take_over=False``);
    ``seen`` is its record."""

    def __init__(self, what: str, seen: Seen, now: float) -> None:
        super().__init__(f"{what} is written by {seen.describe(now)}")
        self.what = what
        self.seen = seen


@dataclass(frozen=True, slots=True)
class Seen:
    """A liveness record as written: who, since when, last seen when."""

    writer: str
    host: str
    pid: int
    started_ms: int
    seen_ms: int
    interval_s: float
    closed: bool = False

    def encode(self) -> bytes:
        return json.dumps({"writer": self.writer, "host": self.host, "pid": self.pid,
                           "started_ms": self.started_ms, "seen_ms": self.seen_ms,
                           "interval_s": self.interval_s, "closed": self.closed},
                          sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Seen | None:
        """The record, or None for bytes that are not one (damaged, foreign)."""
        try:
            doc = json.loads(data)
            return cls(str(doc["writer"]), str(doc["host"]), int(doc["pid"]),
                       int(doc["started_ms"]), int(doc["seen_ms"]),
                       float(doc["interval_s"]), bool(doc["closed"]))
        except (ValueError, KeyError, TypeError):
            return None

    def age(self, now: float) -> float:
        """Seconds since the last refresh (by the reader's clock ``now``)."""
        return max(0.0, now - self.seen_ms / 1000)

    def state(self, now: float) -> str:
        """``live``, ``closed``, ``stale`` (not refreshed for three intervals: a
        crash, a partition) or ``unknown`` (refreshes are off)."""
        if self.closed:
            return "closed"
        if self.interval_s <= 0:
            return "unknown"
        window = STALE_INTERVALS * self.interval_s + STALE_SLACK
        return "live" if self.age(now) < window else "stale"

    def describe(self, now: float) -> str:
        """``WRITER (pid P on HOST), last seen 4 s ago``: for one line of a CLI."""
        where = "" if f"{self.host}:{self.pid}" in self.writer else \
            f" (pid {self.pid} on {self.host})"
        return f"{self.writer}{where}, last seen {_ago(self.age(now))}"

    def document(self, now: float) -> dict[str, object]:
        """The record as ``--json`` shows it."""
        return {"writer": self.writer, "host": self.host, "pid": self.pid,
                "state": self.state(now), "started_ms": self.started_ms,
                "last_seen_ms": self.seen_ms,
                "heartbeat_interval_s": self.interval_s}


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


class Heartbeat:
    """This writer's record at ``key``: :meth:`beat` refreshes it, :meth:`close`
    marks it closed. ``clock`` (seconds since the epoch) is injectable for tests."""

    def __init__(self, store: ObjectStore, prefix: str, writer: str, interval: float, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        now = int(clock() * 1000)
        self.seen = Seen(writer, socket.gethostname(), os.getpid(), now, now, interval)
        # Keyed by the wall clock of the open, and a random suffix (two opens in
        # one millisecond).
        self.key = record_key(prefix, f"{now:020d}-{uuid.uuid4().hex}")

    async def beat(self, *, closed: bool = False) -> None:
        self.seen = replace(self.seen, seen_ms=int(self.clock() * 1000), closed=closed)
        await self.store.put(self.key, self.seen.encode())

    async def close(self) -> None:
        """Mark the record closed; best effort: liveness only informs."""
        try:
            await self.beat(closed=True)
        except TieredStoreError as exc:
            log.warning("could not mark the liveness record %s closed: %s", self.key, exc)


def record_key(prefix: str, order: str) -> str:
    """The key of a record under ``prefix``; ``order`` sorts records by the age
    of their open."""
    return f"{prefix}{RECORD_PREFIX}{order}"


async def start(store: ObjectStore, prefix: str, writer: str, interval: float) -> Heartbeat:
    """This writer's record under ``prefix``, written; the records before it but
    the newest of them deleted (they only inform). One PUT, one LIST and, past
    the first opens, one DELETE."""
    heartbeat = Heartbeat(store, prefix, writer, interval)
    await heartbeat.beat()
    older = sorted(o.key for o in await store.list_all(record_key(prefix, ""))
                   if o.key < heartbeat.key)
    if len(older) > 1:
        await store.delete_many(older[:-1])
    return heartbeat


async def newest(store: ObjectStore, prefix: str) -> Seen | None:
    """The record of the newest opener under ``prefix`` (one LIST, one GET), or
    None when there is none (never opened, or by a version without records)."""
    keys = sorted(o.key for o in await store.list_all(prefix + RECORD_PREFIX))
    for key in reversed(keys):  # a record deleted meanwhile: the one before
        try:
            return Seen.decode(bytes(await store.get(key)))
        except ObjectNotFound:
            continue
    return None


def refuse_if_live(what: str, seen: Seen | None, *, now: float | None = None) -> None:
    """Raise :class:`WriterLive` when ``seen`` is a live writer's record."""
    now = time.time() if now is None else now
    if seen is not None and seen.state(now) == "live":
        raise WriterLive(what, seen, now)
