"""The chaos workload: a message store (and a managed ledger) driven through
a :class:`FaultyObjectStore`, checked against an oracle of what was acknowledged.

One :class:`ChaosRun` per seed. The bucket is a :class:`MemoryObjectStore`
whose chokepoint makes one attempt; the fault store in front of it retries up
to 4 times without backoff, so most injected faults are retried away and some
(mostly during *outages*, short bursts of a high fault rate) exhaust the
retries and reach the store as errors. The workload: appends to three queues,
flushes, reads, retention, reopens, a second writer taking over (half the
time while the first one's flush is under way), and a managed ledger that
rolls over and offloads through the same faults. Everything is seeded and
the store's timers are long (commits on full chunks and flushes only), so a
seed replays the same run, fault for fault.

What is checked (a :class:`Violation` stops the seed and says where):

- every acknowledged message (its append returned an offset, and a later
  ``flush`` or ``close`` returned) reads back exactly, at its offset, after
  every error and every 25 operations (faults off, through the writer's own
  ``get``) and at the end (a fresh store); offsets are contiguous; retention
  deletes only expired messages;
- no read ever returns bytes other than those appended (reads under faults,
  SHORT_READ and FLIP_BITS included, may fail, never lie);
- only a writer another one took over is fenced, and a fenced writer's
  acknowledgements are held by the new writer;
- once faults stop, the same writer goes on (append and flush) without a
  reopen; a fresh open finds no queue corrupt; no store closed after the
  faults stopped leaves a multipart upload;
- the managed ledger's entries read back (offloaded copies too), every
  sealed ledger gets offloaded once faults stop, no offload object is orphaned.

Known bugs (reproduced in ``test_chaos_found.py``, named by their test): where
a host could carry on past one, the run counts it in ``known_hits`` and does
(opens again when one damaged read made a queue "corrupt"; lets a new writer
take over from a falsely fenced one; gives up on a managed ledger that can no
longer be opened); a violation they explain is put down to them
(:func:`classify`). After a garbage-collection pass (:func:`gc_pass`) no
multipart upload may be left under the queues; the offloader's uploads left
from while faults were on (a lost create answer) are counted and classified.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import multiprocessing
import os
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.ledger.helpers import offload_objects
from tests.store.conftest import KiB, small_config
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import CorruptSegment, IntegrityError, SegmentFenced, TieredStoreError
from tieredstore.ledger import (
    LocalLedgerStore,
    ManagedLedger,
    ManagedLedgerConfig,
    OffloadOptions,
    Position,
    SegmentLedgerOffloader,
)
from tieredstore.ledger.errors import ManagedLedgerFenced, OffloadFenced
from tieredstore.ledger.managed.meta.format import offload_uuid
from tieredstore.metadata import CorruptMetadata, MetadataFenced
from tieredstore.objectstore import Chokepoint, MemoryObjectStore, RetryPolicy, UploadInfo
from tieredstore.store import AsyncMessageStore, Message, OffsetOutOfRange
from tieredstore.testing import DATA_KINDS, FaultKind, FaultSchedule, FaultyObjectStore

T = TypeVar("T")

FENCED = (SegmentFenced, MetadataFenced)
LEDGER_FENCED = (ManagedLedgerFenced, OffloadFenced)
QUEUES = (("alpha", 0), ("alpha", 1), ("beta", 0))
T0_MS = 1_700_000_000_000
STEP_MS = 1000
OP_TIMEOUT = 20.0  # an operation that takes longer is wedged
KEY_LOOKUPS = 4  # keyed messages per queue looked up at each verification
MiB = 1024 * KiB


class Violation(AssertionError):
    """An invariant of the store broke (a library bug, or a bug of this harness)."""


@dataclass(frozen=True)
class Rates:
    """How often faults come: ``base`` most of the time, ``outage`` in bursts."""

    base: float = 0.08
    outage: float = 0.7
    outage_chance: float = 0.04  # per step
    outage_steps: tuple[int, int] = (2, 8)


@dataclass
class QueueModel:
    """What the oracle knows of one queue."""

    topic: str
    queue_id: int
    bodies: dict[int, bytes] = field(default_factory=dict)
    stamps: dict[int, int] = field(default_factory=dict)
    next: int = 0  # the offset the writer's next append must return
    acked: int = 0  # offsets below: acknowledged
    floor: int = 0  # offsets below: may be gone (retention)
    appended: int = 0  # appends made, by every writer: numbers the bodies
    keys: dict[int, str] = field(default_factory=dict)  # offset -> its message's key

    def key_of(self, appended: int) -> str | None:
        """Every other message carries a key naming it (the key index is checked)."""
        return None if appended % 2 else f"{self.name}#{appended}"

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.queue_id}"


@dataclass
class SeedResult:
    """What one seed did and found."""

    seed: int
    steps: int = 0
    faults: Counter[tuple[str, FaultKind]] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)  # by the fault store's chokepoint
    pool_retries: int = 0  # commit retries by the upload buffer pools
    surfaced: Counter[str] = field(default_factory=Counter)  # "phase:ErrorType"
    fenced: int = 0  # errors that fenced a writer another one took over
    takeovers: int = 0
    reopens: int = 0
    retention_passes: int = 0
    offloads: int = 0  # offload_prefix calls that returned
    acked: int = 0  # acknowledged messages, at the end
    checked: int = 0  # message reads compared with the oracle
    ledger_entries_checked: int = 0
    data_faults_on_reads: int = 0  # SHORT_READ / FLIP_BITS injected under a checked read
    stale_errors_after_faults: Counter[str] = field(default_factory=Counter)
    leftover_uploads: Counter[str] = field(default_factory=Counter)  # by cause
    violation: str | None = None
    known_bug: str | None = None  # the known bug that stopped it (test_chaos_found.py)
    known_hits: Counter[str] = field(default_factory=Counter)  # known bugs carried past
    stale_heads: list[str] = field(default_factory=list)  # "skipping damaged head" logs
    seconds: float = 0.0


# Bugs reproduced in test_chaos_found.py, by the name of their test. Where a host
# could carry on (open again, take a new writer), the run counts the hit in
# SeedResult.known_hits and goes on; where it cannot, the seed stops (a violation).
BUG_CORRUPT_AT_OPEN = "test_one_corrupted_read_during_open_does_not_mark_the_queue_corrupt"
BUG_STALE_HEAD = "test_one_corrupted_read_of_the_newest_head_loses_no_change"
BUG_HEAD_FENCE = "test_lost_reply_then_corrupted_read_of_its_own_head_is_not_a_fence"
BUG_LEDGER_LOST = "test_a_rollover_whose_head_write_is_unanswered_keeps_its_ledger"
BUG_MARKER_FENCE = "test_lost_reply_then_corrupted_read_of_the_sealed_marker_is_not_a_fence"
BUG_MERGE_UPLOAD = "test_a_merge_that_finds_the_segment_merged_leaves_no_upload"
BUG_RETENTION_MERGE = "test_retention_during_a_merge_leaves_the_queue_readable"
BUG_INDEX_FENCE = "test_lost_reply_then_corrupted_read_of_the_offload_index_is_not_a_fence"

_PATTERNS: list[tuple[str, str]] = [
    (r"sealed at \d+ bytes but the chunks cover \[0, 0\)", BUG_RETENTION_MERGE),
    (r"head version \d+ was written by another writer", BUG_HEAD_FENCE),
    (r"sealed marker says \d+ bytes, we hold \d+", BUG_MARKER_FENCE),
    (r"LedgerNotFound|ledger \d+: no such ledger", BUG_LEDGER_LOST),
    (r"a different index \S+ exists", BUG_INDEX_FENCE),
]


def known_bug_of(text: str) -> str | None:
    """The known bug an error (or a violation's headline) shows, if any."""
    for pattern, name in _PATTERNS:
        if re.search(pattern, text, re.S):
            return name
    return None


def damaged_read(exc: BaseException) -> bool:
    """An error one corrupted GET explains (bug 1 when it marks a queue corrupt)."""
    return isinstance(exc, IntegrityError | CorruptMetadata) or (
        isinstance(exc, CorruptSegment) and "sealed marker" in str(exc)
        and "unreadable" in str(exc))


def classify(result: SeedResult) -> str | None:
    """The known bug that stopped a seed, if one did. A violation about a queue whose
    newest head was read back damaged (so an older one was used) is put down to that."""
    if result.violation is None:
        return None
    headline = result.violation.split("\n  last operations", 1)[0]
    bug = known_bug_of(headline)
    if bug is None:
        stale = {line.split(": ", 1)[0] for line in result.stale_heads}
        named = set(re.findall(r"\b([a-z]+/\d+)\b", headline))
        ledger = re.search(r"\bledger\b", headline) and any("/persistent/" in n
                                                            for n in stale)
        if stale & named or ledger:
            bug = BUG_STALE_HEAD
    return bug


class _StaleHeads(logging.Handler):
    """Collects the metadata's warnings that it skipped a head it read as damaged."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "skipping damaged head" in text or "starting over" in text:
            self.into.append(text)


class Shared(MemoryObjectStore):
    """The bucket: a memory store that makes one attempt per request."""

    def __init__(self) -> None:
        super().__init__(chokepoint=Chokepoint(
            RetryPolicy(max_attempts=1, base_delay=0.0, max_delay=0.0, timeout=30.0), seed=0))


def fault_store(seed: int, rate: float, *, attempts: int = 4) -> FaultyObjectStore:
    """A fault store over a fresh bucket; retries ``attempts`` times, no backoff."""
    chokepoint = Chokepoint(
        RetryPolicy(max_attempts=attempts, base_delay=0.0, max_delay=0.0, timeout=30.0),
        seed=seed)
    return FaultyObjectStore(Shared(), FaultSchedule(seed=seed, rate=rate), chokepoint=chokepoint)


def chaos_config(**overrides: Any) -> TieredStoreConfig:
    """Small segments and chunks (many rolls, seals, merges); long timers (commits
    on full chunks and flushes only: a seed replays the same); a small read cache
    and no read-ahead (reads reach the bucket, and its faults)."""
    base: dict[str, Any] = {
        "commit_log_max_size": 24 * KiB, "group_commit_interval": 60.0,
        "retry_max_attempts": 2, "retry_base_delay": 0.0, "retry_max_delay": 0.0,
        "memory_cache_bytes": 16 * KiB, "readahead_chunk_num": 0, "readahead_chunk_max": 0,
        "file_reserved_time": 0.0, "merge_on_seal": True, "gc_interval": 0.0,
    }
    base.update(overrides)
    return small_config(**base)


def body_of(seed: int, model: QueueModel, n: int, size: int) -> bytes:
    tag = f"{seed}/{model.name}/{n}|".encode()
    return (tag * (size // len(tag) + 1))[:size]


def error_name(exc: BaseException) -> str:
    return type(exc).__name__


async def gc_pass(store: FaultyObjectStore, config: TieredStoreConfig) -> None:
    """One garbage-collection pass, faults off, once every store is closed, from a
    fresh store with a zero safety age: it aborts the multipart uploads dead
    writers left under the queues (a merge whose writer was fenced or died; a
    create whose answer was lost, whose id nobody knows)."""
    store.enabled = False
    fresh = await AsyncMessageStore.open(config, store=store)
    try:
        await fresh.collect_garbage(safety_age=0)
    finally:
        await fresh.close()


class ChaosRun:
    """One seed's workload; :meth:`run` returns its :class:`SeedResult`."""

    def __init__(self, seed: int, *, steps: int = 300, rates: Rates | None = None,
                 check_every: int = 25, ledger: bool = True,
                 config: TieredStoreConfig | None = None) -> None:
        self.seed = seed
        self.steps = steps
        self.rates = rates or Rates()
        self.check_every = check_every
        self.with_ledger = ledger
        self.rng = random.Random(seed)
        self.faults = fault_store(seed, self.rates.base)
        self.config = config or chaos_config()
        self.models = {(t, q): QueueModel(t, q) for t, q in QUEUES}
        self.result = SeedResult(seed)
        self.writer: AsyncMessageStore | None = None
        self.stores: list[AsyncMessageStore] = []  # every store opened, for the pool metrics
        self.opened = 0
        self.step = 0
        self.clock_ms = T0_MS
        self.cutoff_ms = 0  # the latest retention cutoff
        self.outage_left = 0
        self.trace: list[str] = []
        # the managed ledger
        self.tmp: Path | None = None
        self.ml: ManagedLedger | None = None
        self.ml_opened = 0
        self.ml_lost = False  # bug BUG_LEDGER_LOST: it cannot be opened again
        self.ledger_entries: dict[int, list[bytes]] = {}
        self.ledger_appended = 0

    # --- plumbing ---------------------------------------------------------------------

    def note(self, text: str) -> None:
        self.trace.append(f"#{self.step} {text}")

    def violate(self, message: str) -> Violation:
        faults = [f"{f.op} {f.key} {f.kind.value}" for f in self.faults.log[-10:]]
        return Violation(
            f"seed {self.seed}, step {self.step}: {message}\n  last operations:\n    "
            + "\n    ".join(self.trace[-15:])
            + "\n  last injected faults (op key kind):\n    " + "\n    ".join(faults))

    def surfaced(self, phase: str, exc: BaseException) -> None:
        self.result.surfaced[f"{phase}:{error_name(exc)}"] += 1
        self.note(f"{phase} raised {error_name(exc)}: {str(exc)[:160]}")

    def hit(self, bug: str, what: str) -> None:
        """A known bug was hit and the run carries on past it."""
        self.result.known_hits[bug] += 1
        self.note(f"known bug {bug}: {what[:200]}")

    @contextlib.contextmanager
    def faults_off(self) -> Iterator[None]:
        was = self.faults.enabled
        self.faults.enabled = False
        try:
            yield
        finally:
            self.faults.enabled = was

    async def timed(self, what: str, aw: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout(OP_TIMEOUT):
                return await aw
        except TimeoutError as exc:
            if isinstance(exc, TieredStoreError):
                raise
            raise self.violate(f"{what} did not return within {OP_TIMEOUT}s") from exc

    def set_rate(self, rate: float) -> None:
        if self.faults.schedule.rate != rate:
            self.faults.schedule = dataclasses.replace(self.faults.schedule, rate=rate)

    def model_list(self) -> list[QueueModel]:
        return list(self.models.values())

    def ack_all(self, why: str) -> None:
        """A flush (or close) returned: everything appended before it is acknowledged."""
        for m in self.model_list():
            self.result.acked += m.next - m.acked
            m.acked = m.next
        self.note(why)

    @property
    def w(self) -> AsyncMessageStore:
        assert self.writer is not None
        return self.writer

    # --- the run --------------------------------------------------------------------------

    async def run(self) -> SeedResult:
        started = time.perf_counter()
        self.tmp = Path(tempfile.mkdtemp(prefix=f"chaos-{self.seed}-"))
        stale = _StaleHeads(self.result.stale_heads)
        metadata_log = logging.getLogger("tieredstore.metadata")
        level = metadata_log.level
        if metadata_log.getEffectiveLevel() > logging.WARNING:
            metadata_log.setLevel(logging.WARNING)
        metadata_log.addHandler(stale)
        try:
            self.writer = await self.open_writer("first open")
            await self.adopt(self.w)
            for step in range(1, self.steps + 1):
                self.step = step
                self.weather()
                await self.one_step()
                if self.step % self.check_every == 0:
                    await self.verify("periodic check")
            self.step += 1
            await self.finish()
        except Violation as exc:
            self.result.violation = str(exc)
        finally:
            await self.tear_down()
            metadata_log.removeHandler(stale)
            metadata_log.setLevel(level)
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.collect()
            self.result.known_bug = classify(self.result)
            if self.result.stale_heads:
                self.result.known_hits[BUG_STALE_HEAD] += len(self.result.stale_heads)
            self.result.seconds = time.perf_counter() - started
        return self.result

    def weather(self) -> None:
        """Start or end an outage."""
        if self.outage_left > 0:
            self.outage_left -= 1
        elif self.rng.random() < self.rates.outage_chance:
            self.outage_left = self.rng.randint(*self.rates.outage_steps)
            self.note(f"outage for {self.outage_left} steps")
        self.set_rate(self.rates.outage if self.outage_left else self.rates.base)

    async def one_step(self) -> None:
        r = self.rng.random()
        self.clock_ms += STEP_MS
        surfaced = sum(self.result.surfaced.values())
        if r < 0.62:
            m = self.rng.choice(self.model_list())
            for _ in range(self.rng.randint(1, 6)):
                await self.append(m)
        elif r < 0.80:
            await self.flush()
        elif r < 0.90:
            await self.read_under_faults()
        elif r < 0.93:
            await self.retention()
        elif r < 0.95:
            await self.reopen()
        elif r < 0.97:
            await self.takeover()
        elif self.with_ledger:
            await self.quiesce()
            await self.ledger_step()
        if sum(self.result.surfaced.values()) > surfaced:
            await self.verify("check after an error")

    # --- the writer ----------------------------------------------------------------------

    async def open_writer(self, why: str) -> AsyncMessageStore:
        """Open a store on the bucket through the faults; a few tries, then without."""
        for attempt in range(8):
            self.opened += 1
            writer_id = f"chaos-{self.seed}-{self.opened}"
            try:
                with self.faults_off() if attempt == 7 else contextlib.nullcontext():
                    store = await self.timed("open", AsyncMessageStore.open(
                        self.config, store=self.faults, writer_id=writer_id))
            except TieredStoreError as exc:
                self.surfaced("open", exc)
                continue
            self.stores.append(store)
            self.note(f"{why}: opened {writer_id}")
            if store.corrupt:
                problem = self.violate(f"{why}: open found queues corrupt: {store.corrupt}")
                if not self.faults.enabled or not all(map(damaged_read,
                                                          store.corrupt.values())):
                    raise problem
                # One damaged read made a queue corrupt for this store's life: a host
                # would open again (a reopen fences no one but this store).
                self.hit(BUG_CORRUPT_AT_OPEN, f"{why}: {store.corrupt}; opening again")
                with contextlib.suppress(TieredStoreError):
                    await store.close()
                continue
            return store
        raise self.violate(f"{why}: could not open a store")

    async def adopt(self, store: AsyncMessageStore) -> None:
        """A store was opened: what it holds must include everything acknowledged."""
        for m in self.model_list():
            if m.next == 0 and not m.bodies:
                continue
            mx = mn = None
            last: BaseException | None = None
            for attempt in range(6):
                try:
                    # A queue the open could not recover now opens on first use.
                    with self.faults_off() if attempt == 5 else contextlib.nullcontext():
                        mx = await store.max_offset(m.topic, m.queue_id)
                        mn = await store.min_offset(m.topic, m.queue_id)
                    break
                except TieredStoreError as exc:
                    self.surfaced("lazy open", exc)
                    last = exc
            if mx is None or mn is None:
                why = f": {error_name(last)}: {last}" if last is not None else ""
                raise self.violate(f"{m.name}: the new store cannot open it, faults off{why}")
            if mx < m.acked:
                raise self.violate(f"{m.name}: the new store ends at {mx}, but offsets up to "
                                   f"{m.acked} were acknowledged")
            if mx > m.next:
                raise self.violate(f"{m.name}: the new store ends at {mx}, past every offset "
                                   f"handed out ({m.next})")
            for offset in range(mx, m.next):  # never landed: given out again
                m.bodies.pop(offset, None)
                m.stamps.pop(offset, None)
            self.note(f"{m.name}: adopted [{mn}, {mx}) (acked {m.acked}, handed out {m.next})")
            m.acked = m.next = mx  # what landed is durable now (checked by verify)
            self.check_min(m, mn)

    def check_min(self, m: QueueModel, mn: int) -> None:
        """Offsets below ``mn`` are gone: each must have expired."""
        for offset in range(m.floor, min(mn, m.next)):
            stamp = m.stamps.get(offset)
            if stamp is not None and stamp >= self.cutoff_ms:
                raise self.violate(f"{m.name}: min offset {mn}, but offset {offset} (stamp "
                                   f"{stamp}) had not expired (cutoff {self.cutoff_ms})")
        if mn > m.next:
            raise self.violate(f"{m.name}: min offset {mn} past the end {m.next}")
        for offset in range(m.floor, mn):
            m.bodies.pop(offset, None)
            m.stamps.pop(offset, None)
        m.floor = max(m.floor, mn)

    async def append(self, m: QueueModel) -> None:
        size = self.rng.choice([40, 120, 300, 700, 1500]) if self.rng.random() < 0.92 else \
            self.rng.randint(3 * KiB, 10 * KiB)
        m.appended += 1
        body = body_of(self.seed, m, m.appended, size)
        stamp = self.clock_ms
        key = m.key_of(m.appended)
        try:
            offset = await self.timed("append", self.w.append(m.topic, m.queue_id, body,
                                                              timestamp=stamp,
                                                              keys=[key] if key else []))
        except TieredStoreError as exc:
            self.surfaced("append", exc)
            await self.check_not_fenced(exc)
            return
        if offset != m.next:
            raise self.violate(f"{m.name}: append returned offset {offset}, expected {m.next}")
        m.bodies[offset] = body
        m.stamps[offset] = stamp
        if key is not None:
            m.keys[offset] = key
        else:  # an offset handed out again (the one before was lost): not that key's
            m.keys.pop(offset, None)
        m.next += 1

    async def flush(self) -> None:
        try:
            await self.timed("flush", self.w.flush())
        except TieredStoreError as exc:
            self.surfaced("flush", exc)
            await self.check_not_fenced(exc)
            return
        self.ack_all("flush returned")

    async def check_not_fenced(self, exc: BaseException) -> None:
        """The current writer was not replaced: it must never be fenced. (When a known
        bug fenced it, a new writer takes over, as a host would, and the run goes on.)"""
        if not (isinstance(exc, FENCED) or isinstance(exc.__cause__, FENCED)):
            return
        bug = known_bug_of(str(exc))
        if bug not in (BUG_HEAD_FENCE, BUG_MARKER_FENCE):
            raise self.violate(f"the current writer was fenced, no other writer opened: "
                               f"{error_name(exc)}: {exc}")
        self.hit(bug, f"the writer was fenced: {exc}; a new writer takes over")
        with contextlib.suppress(TieredStoreError):
            await self.timed("close", self.w.close())
        self.writer = await self.open_writer("after a false fence")
        await self.adopt(self.w)

    def check_messages(self, m: QueueModel, start: int, got: list[Message], what: str) -> None:
        """Messages read from ``start``: contiguous, each exactly what was appended."""
        for i, message in enumerate(got):
            if message.offset != start + i:
                raise self.violate(f"{m.name}: {what} from {start} returned offset "
                                   f"{message.offset} at index {i}")
            if (message.topic, message.queue_id) != (m.topic, m.queue_id):
                raise self.violate(f"{m.name}: {what} returned a message of "
                                   f"{message.topic}/{message.queue_id}")
            expected = m.bodies.get(message.offset)
            if expected is None:
                raise self.violate(f"{m.name}: {what} returned offset {message.offset}, which "
                                   f"the oracle does not hold (floor {m.floor}, end {m.next})")
            if message.body != expected:
                raise self.violate(
                    f"{m.name}: {what} returned WRONG BYTES at offset {message.offset}: "
                    f"{len(message.body)} bytes {message.body[:40]!r}..., expected "
                    f"{len(expected)} bytes {expected[:40]!r}...")
            if message.store_timestamp != m.stamps[message.offset]:
                raise self.violate(f"{m.name}: offset {message.offset} has timestamp "
                                   f"{message.store_timestamp}, appended with "
                                   f"{m.stamps[message.offset]}")
        self.result.checked += len(got)

    async def read_under_faults(self) -> None:
        """A read with faults on may fail; what it returns must be exact."""
        m = self.rng.choice(self.model_list())
        if m.next <= m.floor:
            return
        start = self.rng.randrange(m.floor, m.next)
        count = self.rng.randint(1, 12)
        before = len(self.faults.log)
        try:
            got = await self.timed("get", self.w.get(m.topic, m.queue_id, start,
                                                     max_count=count))
        except TieredStoreError as exc:
            self.surfaced("read", exc)
            return
        finally:
            self.result.data_faults_on_reads += sum(
                1 for f in self.faults.log[before:] if f.kind in DATA_KINDS)
        self.check_messages(m, start, got, "a read under faults")

    async def read_range(self, store: AsyncMessageStore, m: QueueModel, start: int, end: int,
                         what: str) -> None:
        offset = start
        while offset < end:
            try:
                got = await self.timed("get", store.get(m.topic, m.queue_id, offset,
                                                        max_count=64))
            except TieredStoreError as exc:
                if isinstance(exc, OffsetOutOfRange) and \
                        (mn := await store.min_offset(m.topic, m.queue_id)) > offset:
                    # A trim whose reply was lost, seen just now (the writer stood on
                    # the head that landed): what it dropped must have expired.
                    self.check_min(m, mn)
                    offset = mn
                    continue
                raise self.violate(f"{m.name}: {what}: offset {offset} (acknowledged up to "
                                   f"{m.acked}) cannot be read, faults off: "
                                   f"{error_name(exc)}: {exc}") from exc
            if not got:
                raise self.violate(f"{m.name}: {what}: nothing read at {offset} of {end}")
            self.check_messages(m, offset, got[: end - offset], what)
            offset += len(got)

    async def verify(self, what: str, store: AsyncMessageStore | None = None) -> None:
        """Faults off: every acknowledged message (and every buffered one) reads back."""
        store = store or self.w
        with self.faults_off():
            for m in self.model_list():
                if m.next == 0:
                    continue
                try:
                    mn = await store.min_offset(m.topic, m.queue_id)
                    mx = await store.max_offset(m.topic, m.queue_id)
                except TieredStoreError as exc:
                    raise self.violate(f"{m.name}: {what}: offsets cannot be had, faults off: "
                                       f"{error_name(exc)}: {exc}") from exc
                if mx != m.next:
                    raise self.violate(f"{m.name}: {what}: max offset {mx}, the writer handed "
                                       f"out {m.next}")
                self.check_min(m, mn)
                await self.read_range(store, m, m.floor, m.next, what)
                await self.look_up_keys(store, m, max(m.floor, mn), what)
        self.note(f"{what}: ok")

    async def look_up_keys(self, store: AsyncMessageStore, m: QueueModel, first: int,
                           what: str) -> None:
        """A few keyed messages the oracle holds: the key index finds each, there only."""
        keyed = [o for o in sorted(m.keys) if first <= o < m.next and o in m.bodies]
        for offset in keyed[:: max(1, len(keyed) // KEY_LOOKUPS)][:KEY_LOOKUPS]:
            key = m.keys[offset]
            try:
                got = await self.timed("query_by_key", store.query_by_key(m.topic, key))
            except TieredStoreError as exc:
                raise self.violate(f"{m.name}: {what}: looking up key {key} failed, faults "
                                   f"off: {error_name(exc)}: {exc}") from exc
            found = [(g.queue_id, g.offset, g.body == m.bodies[offset]) for g in got]
            if not found and offset < await store.min_offset(m.topic, m.queue_id):
                continue  # expired meanwhile (a trim whose reply was lost, seen just now)
            if found != [(m.queue_id, offset, True)]:
                raise self.violate(f"{m.name}: {what}: key {key} found at {found[:5]}, its "
                                   f"message is at offset {offset}")

    # --- retention, reopen, takeover ---------------------------------------------------------

    async def retention(self) -> None:
        m = self.rng.choice(self.model_list())
        live = sorted(o for o in m.stamps if o < m.acked)
        if len(live) < 40:
            return
        pick = live[int(len(live) * self.rng.uniform(0.2, 0.7))]
        now = m.stamps[pick] / 1000
        cutoff = int(now * 1000)  # as delete_expired computes it (file_reserved_time 0)
        self.cutoff_ms = max(self.cutoff_ms, cutoff)
        self.note(f"retention up to stamp {cutoff} ({m.name} offset {pick})")
        try:
            deleted = await self.timed("delete_expired", self.w.delete_expired(now=now))
        except TieredStoreError as exc:
            self.surfaced("retention", exc)
            await self.check_not_fenced(exc)
        else:
            self.result.retention_passes += 1
            self.note(f"retention deleted {deleted} segments")
        for other in self.model_list():
            with contextlib.suppress(TieredStoreError), self.faults_off():
                if other.next:
                    self.check_min(other, await self.w.min_offset(other.topic,
                                                                  other.queue_id))

    async def reopen(self) -> None:
        """Close the writer (through the faults) and open a new one."""
        self.result.reopens += 1
        try:
            await self.timed("close", self.w.close())
        except TieredStoreError as exc:
            self.surfaced("close", exc)
            await self.check_not_fenced(exc)
        else:
            self.ack_all("close returned")
        self.writer = await self.open_writer("reopen")
        await self.adopt(self.w)

    async def takeover(self) -> None:
        """A second writer opens the bucket (half the time while the first one's flush
        is under way): the first must be fenced, and nothing it had acknowledged lost."""
        self.result.takeovers += 1
        old = self.w
        fenced = False
        if self.rng.random() < 0.5:
            m = self.rng.choice(self.model_list())
            for _ in range(self.rng.randint(1, 4)):
                await self.append(m)
            flushing = asyncio.ensure_future(self.timed("flush", old.flush()))
            new = await self.open_writer("takeover during a flush")
            try:
                await flushing
            except TieredStoreError as exc:
                self.surfaced("replaced writer", exc)
                fenced = isinstance(exc, FENCED) or isinstance(exc.__cause__, FENCED)
            else:
                self.ack_all("the racing flush returned: the new writer must hold it all")
        else:
            new = await self.open_writer("takeover")
        for _ in range(3 if not fenced else 0):
            m = self.rng.choice(self.model_list())
            m.appended += 1
            body = body_of(self.seed, m, m.appended, 200)
            try:
                offset = await self.timed("append", old.append(m.topic, m.queue_id, body,
                                                               timestamp=self.clock_ms))
                if offset != m.next:
                    raise self.violate(f"{m.name}: the replaced writer's append returned "
                                       f"{offset}, expected {m.next}")
                m.bodies[offset], m.stamps[offset] = body, self.clock_ms
                m.next += 1
                await self.timed("flush", old.flush())
            except TieredStoreError as exc:
                self.surfaced("replaced writer", exc)
                if isinstance(exc, FENCED) or isinstance(exc.__cause__, FENCED):
                    fenced = True
                    break
                continue
            # Acknowledged after the takeover: the new writer must hold it (adopt checks).
            self.ack_all(f"the replaced writer's flush returned ({m.name} offset {offset})")
        if fenced:
            self.result.fenced += 1
        with contextlib.suppress(TieredStoreError):
            await self.timed("close", old.close())
        self.writer = new
        await self.adopt(new)

    # --- the managed ledger --------------------------------------------------------------------

    async def quiesce(self) -> None:
        """Let the writer's background merges and commits finish. The ledger store
        works in threads: whatever ran beside them would interleave at random, and
        a seed would no longer replay the same faults."""
        await self.w.wait_idle()

    async def open_ledger(self) -> ManagedLedger | None:
        assert self.tmp is not None
        self.ml_opened += 1
        ledgers = LocalLedgerStore(self.tmp / "ledgers", fsync=False)
        offloader = SegmentLedgerOffloader(self.faults, options=OffloadOptions(
            block_size=5 * MiB, read_batch_bytes=64 * KiB))
        try:
            ml = await self.timed("ledger open", ManagedLedger.open(
                "tenant/ns/persistent/chaos", metadata_store=self.faults, ledgers=ledgers,
                offloader=offloader, config=ManagedLedgerConfig(auto_offload=False),
                writer_id=f"ml-{self.seed}-{self.ml_opened}", clock=lambda: self.clock_ms / 1000))
        except TieredStoreError as exc:
            self.surfaced("ledger open", exc)
            await offloader.close()
            if known_bug_of(f"{error_name(exc)}: {exc}") == BUG_LEDGER_LOST:
                self.hit(BUG_LEDGER_LOST, f"the managed ledger cannot be opened: {exc}")
                self.ml_lost = True
            return None
        self.note(f"managed ledger opened (current ledger {ml.current_ledger_id})")
        return ml

    async def drop_ledger(self) -> None:
        ml, self.ml = self.ml, None
        if ml is not None:
            with contextlib.suppress(TieredStoreError):
                await self.timed("ledger close", ml.close())
            if ml.offloader is not None:
                await ml.offloader.close()

    async def ledger_step(self) -> None:
        """Add entries, roll the ledger over, offload what is sealed, read some back."""
        if self.ml_lost:
            return
        if self.ml is None:
            self.ml = await self.open_ledger()
            if self.ml is None:
                return
        ml = self.ml
        payloads = []
        for _ in range(self.rng.randint(5, 20)):
            self.ledger_appended += 1
            tag = f"{self.seed}/ledger/{self.ledger_appended}|".encode()
            payloads.append((tag * 400)[: self.rng.randint(0, 4000)])
        try:
            positions = await self.timed("add entries", ml.add_entries(payloads))
            for position, payload in zip(positions, payloads, strict=True):
                entries = self.ledger_entries.setdefault(position.ledger_id, [])
                if position.entry_id != len(entries):
                    raise self.violate(f"ledger {position.ledger_id}: entry id "
                                       f"{position.entry_id}, expected {len(entries)}")
                entries.append(payload)
            await self.timed("rollover", ml.rollover())
            await self.timed("offload", ml.offload_prefix(Position(ml.current_ledger_id, 0)))
            self.result.offloads += 1
            self.note("offload returned")
        except TieredStoreError as exc:
            self.surfaced("ledger", exc)
            if isinstance(exc, LEDGER_FENCED):
                bug = known_bug_of(str(exc))
                if bug is None:
                    raise self.violate(f"the managed ledger was fenced, nobody else opened "
                                       f"it: {exc}") from exc
                self.hit(bug, f"the managed ledger was fenced: {exc}")
            if ml._failed is not None or ml.meta.fenced:  # it says: reopen it
                self.note("the managed ledger failed: reopening it")
                await self.drop_ledger()
            return
        await self.check_ledgers(ml, sample=3, faults=True)

    async def check_ledgers(self, ml: ManagedLedger, *, sample: int | None,
                            faults: bool) -> None:
        """Entries read back exactly (a sample under faults: errors allowed)."""
        ids = sorted(self.ledger_entries)
        if sample is not None:
            ids = self.rng.sample(ids, min(sample, len(ids)))
        for ledger_id in ids:
            entries = self.ledger_entries[ledger_id]
            if not entries:
                continue
            first = self.rng.randrange(len(entries)) if sample is not None else 0
            last = len(entries) - 1
            try:
                got = await self.timed("ledger read", ml.read_entries(ledger_id, first, last))
            except TieredStoreError as exc:
                if not faults:
                    raise self.violate(f"ledger {ledger_id} entries {first}..{last} cannot be "
                                       f"read, faults off: {error_name(exc)}: {exc}") from exc
                self.surfaced("ledger read", exc)
                continue
            if [e.payload for e in got] != entries[first:]:
                raise self.violate(f"ledger {ledger_id}: entries {first}..{last} read back "
                                   f"WRONG")
            self.result.ledger_entries_checked += len(got)

    # --- the end --------------------------------------------------------------------------

    async def upload_ids(self) -> set[str]:
        return {u.upload_id for u in await self.faults.inner.list_multipart_uploads("")}

    async def finish(self) -> None:
        self.note("faults stop")
        self.faults.enabled = False
        before = await self.upload_ids()
        # The same writer goes on, without a reopen (an error it kept may come out once).
        for m in self.model_list():
            for attempt in range(3):
                m.appended += 1
                body = body_of(self.seed, m, m.appended, 500)
                try:
                    offset = await self.timed("append", self.w.append(
                        m.topic, m.queue_id, body, timestamp=self.clock_ms))
                    if offset != m.next:
                        raise self.violate(f"{m.name}: append returned {offset}, expected "
                                           f"{m.next}")
                    m.bodies[offset], m.stamps[offset] = body, self.clock_ms
                    m.next += 1
                    await self.timed("flush", self.w.flush())
                except TieredStoreError as exc:
                    self.result.stale_errors_after_faults[error_name(exc)] += 1
                    self.note(f"after the faults, {m.name} attempt {attempt}: "
                              f"{error_name(exc)}: {exc}")
                    if isinstance(exc, FENCED) or attempt == 2:
                        raise self.violate(
                            f"{m.name}: the writer is wedged after the faults stopped: "
                            f"{error_name(exc)}: {exc}") from exc
                    continue
                self.ack_all(f"after the faults, {m.name} appended and flushed")
                break
        await self.verify("after the faults")
        try:
            await self.timed("close", self.w.close())
        except TieredStoreError as exc:
            raise self.violate(f"close failed, faults off: {error_name(exc)}: {exc}") from exc
        self.writer = None
        # A fresh store reads everything back.
        fresh = await self.open_writer("final open")
        await self.adopt(fresh)
        await self.verify("final read-back", fresh)
        await self.timed("close", fresh.close())
        if self.with_ledger and self.ledger_entries:
            await self.finish_ledger()
        # Every store since the faults stopped was closed cleanly: none may leave an upload.
        new = await self.upload_ids() - before
        if new:
            raise self.violate(f"{len(new)} multipart upload(s) begun after the faults stopped "
                               f"are left, every store closed cleanly")
        await gc_pass(self.faults, self.config)
        await self.count_uploads()

    async def finish_ledger(self) -> None:
        await self.drop_ledger()
        ml = None if self.ml_lost else await self.open_ledger()
        if self.ml_lost:
            self.note("the managed ledger is lost (a known bug): its entries go unchecked")
            return
        if ml is None:
            raise self.violate(f"the managed ledger cannot be opened, faults off: "
                               f"{self.trace[-1].split(' raised ', 1)[-1]}")
        try:
            await self.timed("offload", ml.offload_prefix(Position(ml.current_ledger_id, 0)))
        except TieredStoreError as exc:
            raise self.violate(f"offload fails, faults off: {error_name(exc)}: {exc}") from exc
        await self.check_ledgers(ml, sample=None, faults=False)
        for info in await ml.ledger_infos():
            if info.ledgerId < ml.current_ledger_id and not info.offloadContext.complete:
                raise self.violate(f"ledger {info.ledgerId} is not offloaded, faults off")
        recorded = {f"{offload_uuid(i)}-ledger-{i.ledgerId}" for i in await ml.ledger_infos()
                    if offload_uuid(i) is not None and i.offloadContext.complete}
        self.ml = ml
        await self.drop_ledger()
        orphans = set(await offload_objects(self.faults)) - recorded
        if orphans:
            raise self.violate(f"offload objects no offload records: {sorted(orphans)}")

    async def count_uploads(self) -> None:
        """Uploads left once every store closed: classified by what explains them."""
        uploads: list[UploadInfo] = await self.faults.inner.list_multipart_uploads("")
        lost_creates = Counter(f.key for f in self.faults.log
                               if f.op == "create_multipart" and f.kind is FaultKind.REPLY_LOST)
        failed_aborts = {f.key for f in self.faults.log if f.op == "abort_multipart"}
        queues = [u for u in uploads if not u.key.startswith("offload/")]
        if queues:  # the queues' are the GC's to abort: none may be left after it
            raise self.violate(f"{len(queues)} multipart upload(s) under the queues left "
                               f"after a GC pass, e.g. {queues[0].key}")
        for upload in uploads:
            if lost_creates[upload.key] > 0:
                lost_creates[upload.key] -= 1
                cause = "create answer lost"
            elif upload.key in failed_aborts:
                cause = "abort faulted"
            else:
                cause = f"unexplained (e.g. {BUG_MERGE_UPLOAD})"
            self.result.leftover_uploads[cause] += 1
            self.note(f"upload left: {upload.key} ({cause})")

    async def tear_down(self) -> None:
        self.faults.enabled = False
        for store in self.stores:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(store.close(), OP_TIMEOUT)
        with contextlib.suppress(Exception):
            await self.drop_ledger()

    def collect(self) -> None:
        self.result.steps = self.steps
        self.result.faults = Counter(self.faults.injected)
        self.result.retries = Counter(self.faults.metrics.snapshot()["retries"])
        self.result.pool_retries = sum(s.ctx.pool.metrics.retries for s in self.stores)


def seeds_from_env(default: int) -> list[int]:
    """``TIEREDSTORE_CHAOS_SEEDS=N`` runs seeds 0..N-1 (``a-b`` or ``a,b,c`` too)."""
    text = os.environ.get("TIEREDSTORE_CHAOS_SEEDS", "").strip()
    if not text:
        return list(range(default))
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    if "," in text:
        return [int(s) for s in text.split(",") if s.strip()]
    return list(range(int(text)))


def run_seed(seed: int, steps: int, overrides: dict[str, Any]) -> SeedResult:
    """One seed's run on the store configured by ``chaos_config(**overrides)``."""
    return asyncio.run(ChaosRun(seed, steps=steps, config=chaos_config(**overrides)).run())


async def run_seeds(seeds: list[int], steps: int,
                    overrides: Callable[[int], dict[str, Any]] = lambda seed: {}
                    ) -> dict[int, SeedResult]:
    """Every seed's :func:`run_seed`, each in a worker process, as many at a time
    as this process may use CPUs (``TIEREDSTORE_CHAOS_PROCESSES=N``: N at a time;
    ``1``: one after the other, in this process). A seed shares nothing with
    another: its bucket is in its own memory, its ledgers in a temporary
    directory of its own; no port, no file in common. Spawned workers, not
    forked ones: this process may run threads (moto's server)."""
    raw = os.environ.get("TIEREDSTORE_CHAOS_PROCESSES", "").strip()
    processes = min(len(seeds), int(raw) if raw else len(os.sched_getaffinity(0)))
    if processes <= 1:
        return {seed: await ChaosRun(seed, steps=steps, config=chaos_config(**overrides(seed))
                                     ).run() for seed in seeds}
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = await asyncio.gather(*(loop.run_in_executor(pool, run_seed, seed, steps,
                                                           overrides(seed)) for seed in seeds))
    return dict(zip(seeds, done, strict=True))


def summary(results: list[SeedResult]) -> str:
    """The table the issue asks for: faults by kind, what was retried, fenced, reported."""
    by_kind: Counter[str] = Counter()
    by_op: Counter[str] = Counter()
    retries: Counter[str] = Counter()
    surfaced: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    uploads: Counter[str] = Counter()
    for r in results:
        for (op, kind), n in r.faults.items():
            by_kind[kind.value] += n
            by_op[op] += n
        retries.update(r.retries)
        surfaced.update(r.surfaced)
        stale.update(r.stale_errors_after_faults)
        uploads.update(r.leftover_uploads)
    lines = [f"chaos: {len(results)} seeds, {sum(r.seconds for r in results):.1f}s",
             f"  faults injected: {sum(by_kind.values())}"]
    lines += [f"    {k.value:<14}{by_kind.get(k.value, 0):>7}" for k in FaultKind]
    lines.append("  faults by operation: " + ", ".join(f"{op} {n}" for op, n in
                                                      by_op.most_common()))
    lines.append(f"  retried by the chokepoint: {sum(retries.values())} ("
                 + ", ".join(f"{op} {n}" for op, n in retries.most_common()) + ")")
    lines.append(f"  commit retries by the upload pools: {sum(r.pool_retries for r in results)}")
    lines.append(f"  errors surfaced to the caller: {sum(surfaced.values())}")
    by_type: Counter[str] = Counter()
    for key, n in surfaced.items():
        by_type[key.split(":", 1)[1]] += n
    lines += [f"    {t:<28}{n:>6}" for t, n in by_type.most_common()]
    lines.append("  by phase: " + ", ".join(f"{k} {n}" for k, n in surfaced.most_common()))
    lines.append(f"  takeovers {sum(r.takeovers for r in results)}, replaced writers fenced "
                 f"{sum(r.fenced for r in results)}, reopens {sum(r.reopens for r in results)},"
                 f" retention passes {sum(r.retention_passes for r in results)}, offloads "
                 f"{sum(r.offloads for r in results)}")
    lines.append(f"  messages acknowledged {sum(r.acked for r in results)}, message reads "
                 f"checked {sum(r.checked for r in results)}, ledger entries checked "
                 f"{sum(r.ledger_entries_checked for r in results)}, data faults under "
                 f"checked reads {sum(r.data_faults_on_reads for r in results)}")
    lines.append("  errors once faults stopped: "
                 + (", ".join(f"{k} {n}" for k, n in stale.items()) or "none"))
    lines.append("  multipart uploads left after a GC pass (offloads only): "
                 + (", ".join(f"{k} {n}" for k, n in uploads.items()) or "none"))
    known: dict[str, list[int]] = {}
    hits: Counter[str] = Counter()
    for r in results:
        hits.update(r.known_hits)
        if r.known_bug:
            known.setdefault(r.known_bug, []).append(r.seed)
    lines.append("  known bugs hit and carried past (tests/chaos/test_chaos_found.py):"
                 + ("" if hits else " none"))
    lines += [f"    {n:>4}  {name}" for name, n in hits.most_common()]
    lines.append("  seeds stopped by a known bug:" + ("" if known else " none"))
    lines += [f"    {name}: seeds {seeds}" for name, seeds in known.items()]
    new = [r.seed for r in results if r.violation and not r.known_bug]
    lines.append(f"  seeds with a violation no known bug explains: {new or 'none'}")
    return "\n".join(lines)

