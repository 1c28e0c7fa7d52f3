"""Features crossed: a Hypothesis state machine over owners of one broker (issue 28).

Each owner (an :class:`AsyncMessageStore`) opens with its own write mode
(log/direct), compression (none/zstd) and encryption (none/aes-gcm): every
owner holds the key, so it reads what the others wrote. Owners take over
while the old one is idle, busy, or cut off mid-record (its record's first
chunks landed, the rest not); the old one's writes must then be fenced, and
so must its retention when it finds anything to delete (a GC pass of its
may follow: what the newest owner holds stays); owners reopen (with a
``tieredstore gc`` pass of no safety age between two owners, or not), lose a
queue's heads (and ``tieredstore repair`` runs, or not), and flush through
an object store that loses replies. Bodies are empty, 1 byte, tiny,
compressible, random and incompressible, with keys, tags and properties;
queue ids are 0 and 2**32 - 1; timestamps run out of order within
``timestamp_before_max``; an open that does not take over (the API's
``take_over=False``, the CLI's ``produce`` and ``recover`` without
``--take-over``) is refused while the owner is live and writes nothing;
segments, consume queues, key indexes and log
objects are tiny, so every file rolls; retention cuts at random times, or
past the newest message. A log-mode owner sends commits of 256 bytes or more
to their segments as (partial) chunks, or only full chunks
(``direct_commit_size``, issue 32). An owner claims its queues in the
background after its open, or only those it touches (``claim_concurrency``
0: many queues, few touched, issue 41): the replaced owner's late writes
then meet queues the newest owner has not claimed.

The model is a dict of lists, a message's offset its index, sharing no code
with the store. Every few steps every acknowledged message must read back
through the writer's ``get``, ``get_by_tags``, ``query_by_key`` with random
time ranges and a :class:`ReadOnlyMessageStore` (which reads every message
below the owner's ``commit_offset``, flushed or not: the commit log's durable
tail), and ``verify`` must be clean. (Spark's reader is not used: a Spark
session costs more than the run.)

What it found (issue 28): a takeover across write modes acknowledging one
offset twice, zstd records that do not shrink read as malformed, a queue id
past u32 wedging the log, keyed queues unwritable after lost heads, and a
message whose key-index entries a roll splits (lost keys, a queue that no
longer opens); each has its own test beside the fix. Later (issue 29): lost
heads after retention deleted every sealed segment rebuilt each file at 0
(``test_found.py``). Issue 39: a commit-log segment beginning with a replaced
owner's record cut short, rebuilt as no segment after lost heads, and, when
the cut record left no room for the next one, sealed holding no message.

Both tiers are seeded (12 examples of seed 28; the slow tier 30 of seed 2800):
``TIEREDSTORE_CROSS_EXAMPLES=N`` runs the slow tier with N examples,
``TIEREDSTORE_CROSS_SEED=S`` with seed S (``random``: a new one each run).
Hypothesis prints the steps and a reproduction blob of any failure;
``TIEREDSTORE_CROSS_REPRODUCE=BLOB`` replays it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import io
import logging
import logging.handlers
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import hypothesis
import pytest
from hypothesis import HealthCheck, event, reproduce_failure, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.model.test_store_model import FENCED
from tests.store.conftest import KiB, small_config
from tieredstore.cli import main as cli
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.filetype import FileType
from tieredstore.log.index import read_index
from tieredstore.objectstore import Chokepoint, LocalObjectStore, ObjectStore, RetryPolicy
from tieredstore.store import (
    UNIT_SIZE,
    AsyncMessageStore,
    Message,
    ReadOnlyMessageStore,
    WriterLive,
    metadata_root,
    verify_store,
)
from tieredstore.testing import FaultKind, FaultSchedule, FaultyObjectStore, ForwardingObjectStore

T = TypeVar("T")
Key = tuple[str, int]

KEY_ID = "key-1"
KEY = b"c" * 32
TOPICS = ("ta", "tb")
MAX_QUEUE_ID = 2**32 - 1
QUEUES: list[Key] = [("ta", 0), ("ta", MAX_QUEUE_ID), ("tb", 0)]
TAGS = ("a", "b", "tag-c")
KEYS = ("k1", "k2", "k-3")
WINDOW_MS = 3 * 24 * 3600 * 1000  # timestamp_before_max
MAX_TS = 2**63 - 1
CHECK_EVERY = 3  # steps between full read-backs (every step: offsets)


@dataclass(frozen=True)
class Owner:
    """How one store opens."""

    mode: str
    zstd: bool
    aes: bool
    # Log mode: commits of at least this many bytes go to their segment as chunks
    # (partial ones too), smaller ones into log objects (issue 32); 5 MiB: none here.
    direct_commit: int = 5 * 1024 * KiB
    # Queues claimed in the background after the open; 0: only those touched (many
    # queues, few touched: the replaced owner's late writes meet unclaimed queues).
    claims: int = 16


@dataclass(frozen=True)
class Sent:
    body: bytes
    keys: tuple[str, ...]
    tags: str | None
    properties: dict[str, str]
    timestamp: int


@dataclass
class QueueModel:
    messages: list[Sent] = field(default_factory=list)
    acked: int = 0  # [0, acked): a flush (or close) returned after their append
    min_offset: int = 0  # retention may have deleted the messages before it
    rebuilt: bool = False  # it lost its heads once


def config(owner: Owner, **overrides: Any) -> TieredStoreConfig:
    """1 KiB chunks, consume-queue and key-index segments, 8 KiB commit-log
    segments and 1 KiB log objects: every file rolls within a few steps. No
    timers (commits on full chunks and flushes; rolls by size). Metadata pages
    of two records: tails fill and page out often."""
    return small_config(
        chunk_size=1 * KiB, commit_log_max_size=8 * KiB, consume_queue_max_size=1 * KiB,
        index_max_size=1 * KiB, log_object_size=1 * KiB, rolling_interval=0.0,
        group_commit_interval=3600.0, gc_interval=0.0, retention_interval=0.0,
        file_reserved_time=0.0, memory_cache_bytes=8 * KiB, metadata_page_size=2,
        timestamp_before_max=WINDOW_MS / 1000, write_mode=owner.mode,
        compression="zstd" if owner.zstd else "none",
        encryption="aes-gcm" if owner.aes else "none", encryption_key_id=KEY_ID,
        direct_commit_size=owner.direct_commit, claim_concurrency=owner.claims, **overrides)


# What verify and repair run with: the key in the configuration (they take no provider).
TOOLS = Owner("direct", False, True)
TOOLS_KEY = {"encryption_key": base64.b64encode(KEY).decode()}


def key_provider(key_id: str) -> bytes:
    return {KEY_ID: KEY}[key_id]


# Most appends go to one queue, so that its files (the key index too) roll.
queues = st.sampled_from([QUEUES[0], QUEUES[0], QUEUES[0], *QUEUES])
# The flush-size axis: with a 256-byte direct_commit_size, a flush (or roll) of a
# pending range past 256 bytes goes to its segment as a partial chunk over the
# log pieces before it, one below into a log object, across takeovers and rolls.
owners = st.builds(Owner, st.sampled_from(["log", "direct"]), st.booleans(), st.booleans(),
                   st.sampled_from([5 * 1024 * KiB, 256]), st.sampled_from([16, 0]))
bodies = st.one_of(
    st.just(b""),
    st.binary(min_size=1, max_size=1),
    st.binary(max_size=24),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=4), st.integers(1, 800)),
    st.binary(min_size=100, max_size=1500),
    st.builds(lambda seed, n: random.Random(seed).randbytes(n),  # incompressible
              st.integers(0, 2**32), st.integers(1, 3000)),
)
# Every code point but the surrogates (category Cs): what UTF-8 encodes (a codec= argument
# would have Hypothesis scan all of Unicode to find that set, 2 s once per process).
short_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
messages = st.fixed_dictionaries({
    "body": bodies,
    "keys": st.one_of(st.tuples(st.sampled_from(KEYS)),
                      st.lists(st.sampled_from(KEYS), max_size=2, unique=True).map(tuple)),
    "tags": st.one_of(st.none(), st.sampled_from(TAGS)),
    "properties": st.dictionaries(st.sampled_from(["p", "q", "ü"]), short_text, max_size=2),
    # ms before the clock: mostly in order, sometimes far back within the window
    "back": st.one_of(st.just(0), st.integers(0, 5000), st.integers(0, 5000),
                      st.integers(0, WINDOW_MS - 7200_000)),
})


def pick(data: st.DataObject, items: list[T]) -> T:
    """One of ``items``, drawn the same way however many there are: what the model
    holds depends on timing (which unflushed appends land at a takeover), and
    Hypothesis must draw the same choices when it replays a failure."""
    return items[data.draw(st.integers(0, 999)) % len(items)]


def toml_of(cfg: TieredStoreConfig) -> str:
    """The flat TOML of the settings ``cfg`` changes, for the CLI."""
    lines = []
    needs_unit = {f.name for f in dataclasses.fields(cfg) if f.metadata.get("needs_unit")}
    for name, value in dataclasses.asdict(cfg).items():
        if isinstance(value, float) and math.isinf(value):
            lines.append(f"{name} = inf")
        elif isinstance(value, bool):
            lines.append(f"{name} = {str(value).lower()}")
        elif isinstance(value, int | float) and name in needs_unit and value:
            seconds = f"{value:f}".rstrip("0").rstrip(".")  # a plain number is refused there
            lines.append(f'{name} = "{seconds}s"')
        elif isinstance(value, int | float):
            lines.append(f"{name} = {value}")
        elif isinstance(value, str):
            lines.append(f"{name} = {value!r}".replace("'", '"'))
    return "\n".join(lines) + "\n"


READ_OPS = frozenset({"get", "get_object", "head", "list", "list_pages",
                      "list_multipart_uploads"})


class WatchedStore(ForwardingObjectStore):
    """Forwards to ``inner`` and records each request's kind."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.ops: list[str] = []

    async def _forward(self, op: str, key: str, call: Any, *, bytes_up: int = 0) -> Any:
        self.ops.append(op)
        return await call()


class CrossModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.tmp = Path(tempfile.mkdtemp(prefix="cross-model-"))
        inner = LocalObjectStore(self.tmp / "data", fsync=False, chokepoint=Chokepoint(
            RetryPolicy(max_attempts=1, base_delay=0.0, max_delay=0.0, timeout=30.0)))
        # Lost replies: at most 5 per lossy step, 6 attempts per request: they are all
        # retried away (a request the store sees fail is a finding, not bad luck).
        self.bucket = FaultyObjectStore(
            inner, FaultSchedule(seed=0, rate=0.3, kinds=frozenset({FaultKind.REPLY_LOST})),
            chokepoint=Chokepoint(RetryPolicy(max_attempts=6, base_delay=0.0, max_delay=0.0,
                                              timeout=30.0)), enabled=False)
        self.model: dict[Key, QueueModel] = {}
        self.clock = int(time.time() // 3600 * 3600 * 1000)  # the same for an hour
        self.opens = 0
        self.cutoff = 0  # the latest retention cutoff (ms)
        self.steps = 0
        self.rng = random.Random(0)
        self.store: AsyncMessageStore | None = None
        self.owner = TOOLS
        self.old: AsyncMessageStore | None = None  # the owner the current one took over from
        self.old_queues: list[Key] = []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    @property
    def w(self) -> AsyncMessageStore:
        assert self.store is not None
        return self.store

    async def open(self, owner: Owner, *, heads_lost: bool = False) -> AsyncMessageStore:
        """A new owner; unless heads were lost, its open warns of no missing page."""
        self.opens += 1
        self.owner = owner
        event(f"open {owner.mode} zstd={owner.zstd} aes={owner.aes} "
              f"direct_commit={owner.direct_commit} claims={owner.claims}")
        seen = logging.handlers.BufferingHandler(100_000)
        logging.getLogger("tieredstore").addHandler(seen)
        try:
            store = await AsyncMessageStore.open(
                config(owner), store=ForwardingObjectStore(self.bucket),
                writer_id=f"owner-{self.opens}", key_provider=key_provider)
        finally:
            logging.getLogger("tieredstore").removeHandler(seen)
        missing = [r.getMessage() for r in seen.buffer if "is missing" in r.getMessage()]
        assert heads_lost or not missing, missing
        return store

    @contextlib.contextmanager
    def lossy(self, on: bool) -> Any:
        """Lose the replies of some requests (they took effect) while on."""
        self.bucket.reset(FaultSchedule(seed=self.rng.randrange(2**32), rate=0.3,
                                        kinds=frozenset({FaultKind.REPLY_LOST}), max_faults=5))
        self.bucket.enabled = on
        try:
            yield
        finally:
            self.bucket.enabled = False
        if self.bucket.log:
            event("lost replies")

    @initialize(owner=owners, seed=st.integers(0, 2**32))
    def first_owner(self, owner: Owner, seed: int) -> None:
        self.rng = random.Random(seed)
        self.store = self.run(self.open(owner))

    def teardown(self) -> None:
        try:
            self.bucket.enabled = False
            self.run(self.close_old())
            if self.store is not None:
                self.run(self.store.close())
            self.run(self.bucket.close())
        finally:
            self.runner.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    async def close_old(self) -> None:
        if self.old is not None:
            old, self.old, self.old_queues = self.old, None, []
            with contextlib.suppress(*FENCED):
                await old.close()

    # --- writing -----------------------------------------------------------------------

    def sent_of(self, key: Key, m: dict[str, Any]) -> Sent:
        self.clock += 1000
        body, keys = m["body"], m["keys"]
        return Sent(body, keys, m["tags"], m["properties"], self.clock - m["back"])

    async def append_one(self, key: Key, sent: Sent) -> None:
        q = self.model.setdefault(key, QueueModel())
        offset = await self.w.append(*key, sent.body, keys=sent.keys, tags=sent.tags,
                                     properties=sent.properties, timestamp=sent.timestamp)
        assert offset == len(q.messages), f"{key}: append got offset {offset}"
        q.messages.append(sent)

    def append_all(self, key: Key, batch: list[dict[str, Any]]) -> None:
        async def go() -> None:
            for m in batch:
                await self.append_one(key, self.sent_of(key, m))

        self.run(go())

    # Appends are two rules: a third of the steps (the others are enabled as often).
    @rule(key=queues, batch=st.lists(messages, min_size=1, max_size=12))
    def append(self, key: Key, batch: list[dict[str, Any]]) -> None:
        self.append_all(key, batch)

    @rule(key=queues, batch=st.lists(messages, min_size=1, max_size=12))
    def append_more(self, key: Key, batch: list[dict[str, Any]]) -> None:
        self.append_all(key, batch)

    @rule(how=st.sampled_from(["take over", "take over busy", "take over mid-record",
                               "reopen", "reopen after gc", "lose heads", "lose heads, repair"]),
          owner=owners, lossy=st.booleans(), data=st.data())
    def change_owner(self, how: str, owner: Owner, lossy: bool, data: st.DataObject) -> None:
        """A new owner, one of seven ways (one rule: owners change every few steps)."""
        event(f"new owner: {how}")
        if how.endswith("mid-record"):
            self.cut_a_record(data)
        if how.startswith("take over"):
            self.take_over(owner, how.endswith("busy"), lossy)
        elif how.startswith("reopen"):
            self.reopen(owner, gc=how.endswith("gc"))
        else:
            self.lose_heads(data, owner, how.endswith("repair"))

    @rule(lossy=st.booleans())
    def flush(self, lossy: bool) -> None:
        with self.lossy(lossy):
            self.run(self.w.flush())
        for q in self.model.values():
            q.acked = len(q.messages)

    def cut_a_record(self, data: st.DataObject) -> None:
        """Two incompressible records are appended (not flushed), the first over
        half a commit-log segment, and the commits due land (``wait_idle``): the
        second begins a segment, its full chunks in the bucket and its tail not.
        The owner taken over then leaves it cut short: dead space at the start of
        a segment, which its successor writes on (up to 6 KiB of 8: its next
        record may not fit), rolls, and may lose the heads of (issue 39)."""
        key = QUEUES[0]

        async def go() -> None:
            for size in (4600, data.draw(st.sampled_from([2500, 7000]))):
                m = data.draw(messages)
                body = random.Random(data.draw(st.integers(0, 2**32))).randbytes(size)
                await self.append_one(key, self.sent_of(key, {**m, "body": body}))
            await self.w.wait_idle()

        self.run(go())

    def take_over(self, owner: Owner, busy: bool, lossy: bool) -> None:
        """A new owner opens while this one is open, idle or flushing its appends.
        A flush that returned is held by the new owner; the old one is fenced."""
        old = self.w

        async def old_flush() -> bool:
            if not busy:
                return False
            try:
                await old.flush()
            except FENCED:
                return False
            return True

        async def go() -> None:
            await self.close_old()
            held = old.queues()
            with self.lossy(lossy):
                new, flushed = await asyncio.gather(self.open(owner), old_flush())
            self.old, self.old_queues, self.store = old, held, new
            # Without background claims the new owner claims no queue here: what
            # landed is read without it, as a reader would.
            async with await ReadOnlyMessageStore.open(
                    config(owner), store=self.bucket, key_provider=key_provider) as ro:
                sizes = {key: await (new if owner.claims else ro).max_offset(*key)
                         for key in self.model}
            for key, q in self.model.items():
                if flushed:
                    q.acked = len(q.messages)
                landed = sizes[key]
                assert q.acked <= landed <= len(q.messages), \
                    f"{key}: {landed} messages, {q.acked} acknowledged, {len(q.messages)} sent"
                del q.messages[landed:]  # the old owner's unflushed appends: gone or landed
                q.acked = landed

        self.run(go())

    @precondition(lambda self: bool(self.old_queues))
    @rule(data=st.data(), m=messages)
    def old_owner_is_fenced(self, data: st.DataObject, m: dict[str, Any]) -> None:
        key = pick(data, self.old_queues)
        sent = self.sent_of(key, m)
        old = self.old
        assert old is not None

        async def go() -> None:
            with pytest.raises(FENCED):
                await old.append(*key, sent.body, keys=sent.keys, tags=sent.tags,
                                 timestamp=sent.timestamp)
                await old.flush()

        self.run(go())

    @precondition(lambda self: self.old is not None)
    @rule(data=st.data(), gc=st.booleans())
    def zombie_retention(self, data: st.DataObject, gc: bool) -> None:
        """The owner taken over runs retention at a cutoff (and, with ``gc``, a
        garbage-collection pass of no safety age) after the takeover: it is fenced
        before it deletes anything (its trim is a head write the newest owner's
        claim fences), and every live message still reads back through the
        newest owner. The newest owner is idle first (a pass of no safety age
        beside an upload in flight is no case the GC covers). After ``gc`` the
        old owner is closed: the log fences that stop it may be gone, which
        docs/log-objects.md allows for a writer replaced longer than the safety age."""
        old = self.old
        assert old is not None
        cutoff = self.draw_cutoff(data) or self.clock

        async def go() -> None:
            await self.w.wait_idle()
            try:
                deleted = await old.delete_expired(now=cutoff / 1000)
            except FENCED:
                event("zombie retention fenced")
            else:
                assert deleted == 0, \
                    f"the replaced owner's retention at {cutoff} deleted {deleted} segment(s)"
                event("zombie retention found nothing to delete")
            if gc:
                # A pass of no safety age stands for one past the safety age: by then
                # the replaced owner has tried a write and stopped (docs/log-objects.md,
                # "Deletion": one replaced and paused longer than that is the case
                # fences no longer stop). Its flush is that write.
                with contextlib.suppress(*FENCED):
                    await old.flush()
                try:
                    report = await old.collect_garbage(safety_age=0)
                except FENCED:
                    event("zombie gc fenced")
                else:
                    event(f"zombie gc not fenced, deleted {'some' if report.deleted else 'none'}")
                await self.close_old()
            await self.check_all()

        self.run(go())

    def reopen(self, owner: Owner, *, gc: bool = False) -> None:
        """Close (which flushes) and open again, maybe with other settings; with
        ``gc``, between the two a ``tieredstore gc`` pass with no safety age
        collects what nothing needs (every kind: the queues', the log's, fences)."""

        async def go() -> None:
            await self.close_old()
            await self.w.close()
            if gc:
                self.cli("gc", "--safety-age", "0")
            self.store = await self.open(owner)
            for key, q in self.model.items():
                q.acked = len(q.messages)
                assert await self.w.max_offset(*key) == len(q.messages), key

        self.run(go())

    def lose_heads(self, data: st.DataObject, owner: Owner, repair: bool) -> None:
        """Between owners the heads of a queue holding messages are deleted;
        ``repair`` rebuilds them, or the next owner's first access does. (An
        empty queue that loses its heads is gone: no such queue.)"""
        keys = sorted(k for k, q in self.model.items() if len(q.messages) > q.min_offset)
        if not keys:
            return self.reopen(owner)
        key = pick(data, keys)

        async def drop() -> None:
            await self.close_old()
            await self.w.close()
            prefix = f"{metadata_root(config(TOOLS))}/meta/heads/{key[0]}/{key[1]}/"
            heads = [o.key for o in await self.bucket.list_all(prefix)]
            assert heads, f"{key}: no heads under {prefix}"
            await self.bucket.delete_many(heads)

        self.run(drop())
        q = self.model[key]
        q.rebuilt, q.acked = True, len(q.messages)
        for other in self.model.values():
            other.acked = len(other.messages)
        if repair:
            self.cli("repair")
        self.store = self.run(self.open(owner, heads_lost=True))

    def cli(self, *args: str, status: int = 0) -> str:
        path = self.tmp / "cli.toml"
        path.write_text(toml_of(config(TOOLS, **TOOLS_KEY)))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            got = cli([*args, "-q", "--config", str(path), "--data-dir",
                       str(self.tmp / "data")])
        assert got == status, f"tieredstore {' '.join(args)}: exit {got}\n{out.getvalue()}"
        return out.getvalue()

    def draw_cutoff(self, data: st.DataObject) -> int | None:
        """A retention cutoff (ms): a stored message's time or just past it, or (one
        in four) past the newest, which expires every sealed segment holding no
        message of that time: lost heads after that was issue 39's find. None
        while no message is stored."""
        stamps = sorted({m.timestamp for q in self.model.values() for m in q.messages})
        if not stamps:
            return None
        if data.draw(st.integers(0, 3)) == 0:
            return stamps[-1] + 1
        return pick(data, stamps) + data.draw(st.sampled_from([0, 1]))

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        """Retention at a cutoff: only messages older than it may go."""
        cutoff = self.draw_cutoff(data)
        if cutoff is None:
            return

        async def go() -> None:
            await self.close_old()  # retention may delete the fence it holds (test_found.py)
            await self.w.delete_expired(now=cutoff / 1000)
            self.cutoff = max(self.cutoff, cutoff)
            for key, q in self.model.items():
                new_min = await self.w.min_offset(*key)
                assert q.min_offset <= new_min <= len(q.messages), (key, new_min)
                gone = [o for o in range(q.min_offset, new_min)
                        if q.messages[o].timestamp >= cutoff]
                assert not gone, f"{key}: retention at {cutoff} deleted newer offsets {gone}"
                if new_min > q.min_offset:
                    event("retention deleted some")
                q.min_offset = new_min

        self.run(go())

    @rule(owner=owners, via=st.sampled_from(["api", "cli produce", "cli recover"]))
    def polite_open_is_refused(self, owner: Owner, via: str) -> None:
        """An open that does not take over (``take_over=False``, a CLI writer without
        ``--take-over``) while the owner is live is refused naming it, sends no write
        and writes no liveness record, so it fences nobody (issue 39: liveness informs,
        fencing decides). The owner's own background work goes on meanwhile."""
        writers = f"{metadata_root(config(TOOLS))}/writers/live-"

        async def registered() -> list[str]:
            return sorted(o.key for o in await self.bucket.list_all(writers))

        async def go() -> None:
            before = await registered()
            if via == "api":
                watched = WatchedStore(self.bucket)
                with pytest.raises(WriterLive) as refused:
                    await AsyncMessageStore.open(config(owner), store=watched,
                                                 key_provider=key_provider, take_over=False)
                assert refused.value.seen.writer == f"owner-{self.opens}"
                sent = [op for op in watched.ops if op not in READ_OPS]
                assert not sent, f"a refused open sent {sent}"
            else:
                args = ["produce", "--topic", "ta", "--queue", "0", "--count", "1"] \
                    if via == "cli produce" else ["recover"]
                said = self.cli(*args, status=2)
                assert f"owner-{self.opens}" in said and "--take-over" in said, said
            assert await registered() == before, f"{via}: a refused open wrote a liveness record"

        self.run(go())
        event(f"refused a polite open ({via})")

    @rule(queue_id=st.sampled_from([2**32, 2**40, 10**20]))
    def queue_id_too_large_is_refused(self, queue_id: int) -> None:
        with pytest.raises(TieredStoreError, match="queue_id"):
            self.run(self.w.append("ta", queue_id, b"x"))
        assert ("ta", queue_id) not in self.w.queues()

    @rule(key=queues, batch=st.lists(messages, min_size=4, max_size=20),
          wanted=st.sampled_from(KEYS))
    def query_by_key_beside_appends(self, key: Key, batch: list[dict[str, Any]],
                                    wanted: str) -> None:
        """A query while appends roll the key index finds what was flushed before."""
        self.flush(False)
        before = self.must_find(key[0], wanted, 0, MAX_TS, acked=True)

        async def appends() -> None:
            for m in batch:
                await self.append_one(key, self.sent_of(key, m))
                await asyncio.sleep(0)

        async def go() -> list[Message]:
            found, _ = await asyncio.gather(self.w.query_by_key(key[0], wanted, max_count=10**6),
                                            appends())
            return found

        got = {(m.queue_id, m.offset) for m in self.run(go())}
        assert before <= got, f"{wanted}: missed {sorted(before - got)}"

    # --- reading around damage (issue 39) ----------------------------------------------

    @precondition(lambda self: any(q.acked > q.min_offset for q in self.model.values()))
    @rule(data=st.data())
    def read_around_damage(self, data: st.DataObject) -> None:
        """A byte of one of a queue's stored objects flipped (a commit-log or
        consume-queue chunk, merged segment or sealed marker, or the queue's piece
        in a log object), then put back. Meanwhile, through the writer and a
        read-only store: a strict ``get`` raises or reads right, and
        ``get_around_damage`` returns messages equal to the model and reports
        every other offset skipped. (Which offsets the byte makes unreadable the
        model does not know: a unit held in a cache still reads.) Once the byte
        is back, nothing is skipped: no failure was kept."""
        key = pick(data, sorted(k for k, q in self.model.items() if q.acked > q.min_offset))
        q = self.model[key]

        async def go() -> None:
            await self.close_old()
            await self.w.wait_idle()  # no merge or compaction reads the damage, or copies it
            kind, target, start, end = pick(data, await damage_targets(self.bucket, key))
            at = start + data.draw(st.integers(0, 2**20)) % (end - start)
            event(f"damage: {kind}")
            original = await self.bucket.get_object(target)
            damaged = bytearray(original.data)
            damaged[at] ^= 1 << data.draw(st.integers(0, 7))
            await self.bucket.put(target, bytes(damaged), metadata=dict(original.info.metadata))
            try:
                skipped = await self.check_around(key, q.min_offset, len(q.messages), self.w,
                                                  "writer")
                async with await ReadOnlyMessageStore.open(
                        config(self.owner), store=self.bucket, key_provider=key_provider) as ro:
                    skipped |= await self.check_around(key, q.min_offset, q.acked, ro,
                                                       "read-only")
            finally:
                await self.bucket.put(target, original.data,
                                      metadata=dict(original.info.metadata))
            if skipped:
                event("damage skipped offsets")
            after = await self.check_around(key, q.min_offset, len(q.messages), self.w,
                                            "writer, the byte back")
            assert not after, f"{key}: skipped {sorted(after)} once the damage was repaired"

        self.run(go())

    async def check_around(self, key: Key, start: int, end: int,
                           reader: AsyncMessageStore | ReadOnlyMessageStore, where: str
                           ) -> set[int]:
        """Offsets ``[start, end)`` strictly and around damage (see the rule); the
        offsets skipped."""
        offset = start
        while offset < end:
            try:
                got = await reader.get(*key, offset, max_count=self.rng.randint(1, 9))
            except TieredStoreError:
                offset += 1  # strict: it raises at damage
                continue
            assert got and [m.offset for m in got] == list(range(offset, offset + len(got)))
            for m in got:
                self.check_message(m, f"{where}, strict, beside damage")
            offset += len(got)
        skipped: set[int] = set()
        offset = start
        while offset < end:
            answer = await reader.get_around_damage(*key, offset,
                                                    max_count=self.rng.randint(1, 40))
            assert answer.next_offset > offset, f"{where} {key}: no progress at {offset}"
            for m in answer.messages:
                self.check_message(m, f"{where}, around damage")
            here = {m.offset for m in answer.messages}
            for step in answer.skipped:
                span = set(range(step.first_offset, step.end_offset))
                assert step.reason and span and not span & here, f"{where}: {step}"
                here |= span
                skipped |= span
            assert here == set(range(offset, answer.next_offset)), \
                f"{where} {key}: [{offset}, {answer.next_offset}) not all read or reported"
            offset = answer.next_offset
        return skipped

    # --- reading back ------------------------------------------------------------------

    def keyed(self, topic: str, key: str, begin: int, end: int, *, acked: bool) -> set[Key]:
        """(queue id, offset) of the messages with ``key`` stored in [begin, end]."""
        return {(qid, o) for (t, qid), q in self.model.items() if t == topic
                for o in range(q.min_offset, q.acked if acked else len(q.messages))
                if key in q.messages[o].keys and begin <= q.messages[o].timestamp <= end}

    def must_find(self, topic: str, key: str, begin: int, end: int, *, acked: bool) -> set[Key]:
        """What a key lookup must find: retention deletes a key-index segment by its
        own newest timestamp, so a message older than a cutoff may be gone from the
        index while its commit-log segment (holding a newer message) stays."""
        return {(qid, o) for qid, o in self.keyed(topic, key, begin, end, acked=acked)
                if self.model[(topic, qid)].messages[o].timestamp >= self.cutoff}

    def check_message(self, got: Message, where: str) -> None:
        q = self.model[(got.topic, got.queue_id)]
        sent = q.messages[got.offset]
        assert got.body == sent.body, f"{where}: {got.topic}/{got.queue_id}@{got.offset} body"
        assert (got.keys, got.tags, dict(got.properties), got.store_timestamp) == \
            (sent.keys, sent.tags, sent.properties, sent.timestamp), f"{where}: {got}"

    async def read_range(self, reader: AsyncMessageStore | ReadOnlyMessageStore, key: Key,
                         start: int, end: int, where: str, *, max_count: int = 0) -> None:
        """``get`` from ``start`` to ``end``, a few messages at a time (at most
        ``max_count``, if given) and some byte limit."""
        offset = start
        while offset < end:
            got = await reader.get(*key, offset, max_count=max_count or self.rng.randint(1, 9),
                                   max_bytes=self.rng.choice([1, 4 * KiB, 1 << 30]))
            assert got, f"{where} {key}: nothing read at {offset} of {end}"
            assert [m.offset for m in got] == list(range(offset, offset + len(got))), where
            for m in got:
                if m.offset < end:
                    self.check_message(m, where)
            offset += len(got)

    async def check_tags(self, key: Key) -> None:
        q = self.model[key]
        tag = self.rng.choice(TAGS)
        want = [o for o in range(q.min_offset, len(q.messages)) if q.messages[o].tags == tag]
        got: list[int] = []
        offset = q.min_offset
        while offset < len(q.messages):
            found = await self.w.get_by_tags(*key, offset, tag, max_count=5)
            for m in found.messages:
                self.check_message(m, "get_by_tags")
            got += [m.offset for m in found.messages]
            assert found.next_offset > offset, (key, offset, found)
            offset = found.next_offset
        assert got == want, f"{key} tags {tag}: got {got}, want {want}"

    def time_range(self) -> tuple[int, int]:
        """All time, between two stamps, or a few seconds around one."""
        stamps = [m.timestamp for q in self.model.values() for m in q.messages] or [0]
        a, b = sorted(self.rng.choice(stamps) + self.rng.choice([-1, 0, 1]) for _ in "ab")
        if self.rng.random() < 0.5:
            a = b = self.rng.choice(stamps)
            a, b = a - self.rng.randint(0, 3000), b + self.rng.randint(0, 3000)
        return (0, MAX_TS) if self.rng.random() < 0.2 else (max(0, a), max(0, b))

    async def check_keys(self, reader: AsyncMessageStore | ReadOnlyMessageStore,
                         acked: bool) -> None:
        for topic, key in [(t, k) for t in TOPICS for k in KEYS]:
            begin, end = self.time_range()
            got = await reader.query_by_key(topic, key, begin, end, max_count=10**6)
            where = f"query_by_key({topic}, {key}, {begin}, {end}) of {type(reader).__name__}"
            for m in got:
                assert m.topic == topic and key in m.keys, where
                assert begin <= m.store_timestamp <= end, where
                if m.offset >= self.model[(topic, m.queue_id)].min_offset:
                    self.check_message(m, where)
            found = {(m.queue_id, m.offset) for m in got}
            missed = self.must_find(topic, key, begin, end, acked=acked) - found
            if missed:
                again = {(m.queue_id, m.offset)
                         for m in await reader.query_by_key(topic, key, begin, end, 10**6)}
                raise AssertionError(
                    f"{where}: missed (queue, offset) {sorted(missed)}; acknowledged: "
                    f"{[o < self.model[(topic, q)].acked for q, o in sorted(missed)]}; "
                    f"the same query again misses {sorted(missed - again)}")
            # more than the model has: only what retention may have kept
            extra = {(qid, o) for qid, o in found - self.keyed(topic, key, begin, end,
                                                               acked=False)
                     if o >= self.model[(topic, qid)].min_offset}
            assert not extra, f"{where}: unexpected {sorted(extra)}"

    async def check_all(self) -> None:
        for key, q in sorted(self.model.items()):
            await self.read_range(self.w, key, q.min_offset, len(q.messages), "writer")
            await self.check_tags(key)
        await self.check_keys(self.w, acked=False)
        # Durable is readable without a writer: below the owner's commit_offset (no
        # flush; its consume queue may trail, the rest is the commit log's tail).
        committed = {key: await self.w.commit_offset(*key) for key in sorted(self.model)}
        async with await ReadOnlyMessageStore.open(config(self.owner), store=self.bucket,
                                                   key_provider=key_provider) as ro:
            for key, q in sorted(self.model.items()):
                durable = max(q.acked, committed[key])
                if durable > q.min_offset:
                    low, top = await ro.min_offset(*key), await ro.max_offset(*key)
                    assert low <= q.min_offset, (key, low)
                    assert durable <= top <= len(q.messages), (key, q.acked, committed[key],
                                                               top, len(q.messages))
                    await self.read_range(ro, key, q.min_offset, q.acked, "read-only")
                    await self.read_range(ro, key, max(q.min_offset, q.acked), durable,
                                          "read-only, unflushed", max_count=64)
                    if durable > max(q.acked, q.min_offset):
                        view = await ro.queue(*key)
                        event("read-only: unflushed messages read" + (
                            ", past the consume queue" if view.cq.end // UNIT_SIZE < durable
                            else ""))
            await self.check_keys(ro, acked=True)
        await self.check_verify()

    async def check_verify(self) -> None:
        report = await verify_store(self.bucket, config(TOOLS, **TOOLS_KEY))
        errors = [e for c in report.queues for e in c.errors]
        assert not errors, f"verify: {errors}"
        seen = {(c.topic, c.queue_id) for c in report.queues}
        assert {k for k, q in self.model.items() if q.acked} <= seen, seen

    @invariant()
    def reads_back(self) -> None:
        if self.store is None:
            return
        self.steps += 1

        async def offsets() -> None:
            for key, q in self.model.items():
                low, high = await self.w.min_offset(*key), await self.w.max_offset(*key)
                assert (low, high) == (q.min_offset, len(q.messages)), (key, low, high)
                assert await self.w.commit_offset(*key) >= q.acked, key

        self.run(offsets())
        if self.steps % CHECK_EVERY == 0:
            self.run(self.check_all())


async def damage_targets(bucket: ObjectStore, key: Key) -> list[tuple[str, str, int, int]]:
    """What of queue ``key`` a flipped byte may hit: (kind, object key, first byte,
    end byte) of each commit-log and consume-queue object holding bytes, and of
    each of its pieces in a log object (not a log object's index: that is no
    queue's)."""
    topic, queue_id = key
    out: list[tuple[str, str, int, int]] = []
    for info in sorted(await bucket.list_all(""), key=lambda i: i.key):
        if not info.size:
            continue
        for label in ("commitlog", "consumequeue"):
            if f"/{topic}/{queue_id}/{label}/" in info.key:
                out.append((f"{label} {info.key.rsplit('/', 1)[1].split('-')[0]}", info.key,
                            0, info.size))
        if "/log/log-" in info.key:
            for piece in await read_index(bucket, info.key, info.size):
                if (piece.topic, piece.queue_id) == key and piece.length and \
                        piece.file_type in (FileType.COMMIT_LOG, FileType.CONSUME_QUEUE):
                    out.append((f"{piece.file_type.label} piece in a log object", info.key,
                                piece.object_offset, piece.object_offset + piece.length))
    assert out, f"{key}: nothing stored"
    return out


def run_machine(examples: int, default_seed: int) -> None:
    """Seeded, so that a run in CI is the run a developer repeats:
    ``TIEREDSTORE_CROSS_SEED=S`` runs seed S instead (``random``: Hypothesis's
    own); ``TIEREDSTORE_CROSS_REPRODUCE=BLOB`` replays a failure it printed."""
    text = os.environ.get("TIEREDSTORE_CROSS_SEED", str(default_seed))
    text = "" if text == "random" else text
    factory = seed(int(text))(CrossModel) if text else CrossModel
    blob = os.environ.get("TIEREDSTORE_CROSS_REPRODUCE")
    if blob:
        factory = reproduce_failure(hypothesis.__version__, blob.encode())(factory)
    run_state_machine_as_test(factory, settings=settings(
        max_examples=examples, stateful_step_count=40, deadline=None, print_blob=True,
        database=None if text else settings.default.database,
        suppress_health_check=list(HealthCheck)))


@pytest.mark.filterwarnings("error::ResourceWarning")
def test_features_crossed() -> None:
    run_machine(12, default_seed=28)


@pytest.mark.slow
def test_features_crossed_many() -> None:
    run_machine(int(os.environ.get("TIEREDSTORE_CROSS_EXAMPLES", "30")), default_seed=2800)
