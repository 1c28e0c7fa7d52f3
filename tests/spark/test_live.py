"""The Spark reader beside a live writer reports no error that is not there.

A writer process (``tests.cli.live_writer``: three queues, tiny segments, so
it appends, rolls, seals and merges all the time) runs for
TIEREDSTORE_LIVE_SECONDS; beside it, Spark queries run in a loop: a full
count, a per-queue count with the first and last offset, and the offsets and
bodies of each queue from near its end. Every query must succeed, return each
queue's offsets without a gap or a repeat and every body as the writer wrote
it (its random bytes are replayed here), and no queue's count may go back
from one query to the next. Once the writer is done, a last read must equal
what ``MessageStore`` returns, message for message.

A task lists a segment while it is the active one and reads it a moment
later; if the writer sealed and merged it in between, the chunks listed are
gone. ``test_a_segment_merged_between_listing_and_reading`` makes that
happen on purpose, for a consume-queue and for a commit-log segment.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tieredstore.config import load_config
from tieredstore.errors import ObjectNotFound
from tieredstore.objectstore import ByteRange, ObjectData
from tieredstore.spark.read.plan import plan_read
from tieredstore.spark.read.reader import scan_slice
from tieredstore.spark.read.selection import Selection
from tieredstore.store import (
    AsyncMessageStore,
    MessageStore,
    open_object_store,
    reading_fetcher,
)
from tieredstore.testing import ForwardingObjectStore

ROOT = Path(__file__).resolve().parents[2]
SECONDS = float(os.environ.get("TIEREDSTORE_LIVE_SECONDS", "15"))
TOPIC = "t"
QUEUE_IDS = (0, 1, 2)
TAIL = 100  # a queue read starts this many offsets before the end last seen
TAIL_ROUNDS = 3  # reads of each queue's end (quick) per full count (slower as the store grows)
# The writer's settings (tests/cli/live_writer.py), given to the reader too.
WRITER_CONFIG: dict[str, Any] = {
    "chunk_size": 4096, "commit_log_max_size": 32 * 1024, "consume_queue_max_size": 64 * 32,
    "pool_bytes": 256 * 1024, "max_message_size": 8192, "group_commit_interval": 0.02,
    "metadata_page_size": 4, "gc_interval": 0,
}


def writer_config(path: Path) -> Any:
    return load_config(env={}, backend="local", local_path=str(path), local_fsync=False,
                       **WRITER_CONFIG)


class Written:
    """The writer's bodies, replayed from its seed: each round appends
    ``randbytes(randint(10, 1500))`` to queues 0, 1 and 2 in turn."""

    def __init__(self) -> None:
        self._rng = random.Random(1)
        self.bodies: dict[int, list[bytes]] = {q: [] for q in QUEUE_IDS}

    def body(self, queue_id: int, offset: int) -> bytes:
        while len(self.bodies[queue_id]) <= offset:
            for q in QUEUE_IDS:
                self.bodies[q].append(self._rng.randbytes(self._rng.randint(10, 1500)))
        return self.bodies[queue_id][offset]


class Reads:
    """Spark queries over the live store; each returns a problem, or None."""

    def __init__(self, spark: Any, path: Path) -> None:
        self.spark = spark
        self.options = {"path": str(path), **{k: str(v) for k, v in WRITER_CONFIG.items()}}
        self.written = Written()
        self.ends: dict[int, int] = {q: 0 for q in QUEUE_IDS}  # one past the last offset seen
        self.total = 0

    def frame(self, **options: str) -> Any:
        return self.spark.read.format("tieredstore").options(**self.options, **options).load()

    def _grew(self, queue_id: int, end: int, what: str) -> str | None:
        if end < self.ends[queue_id]:
            return f"{what}: queue {queue_id} went back from {self.ends[queue_id]} to {end}"
        self.ends[queue_id] = end
        return None

    def count(self) -> str | None:
        total = self.frame().count()
        if total < self.total:
            return f"count went back from {self.total} to {total}"
        self.total = total
        return None

    def per_queue(self) -> str | None:
        from pyspark.sql import functions as F

        rows = (self.frame().groupBy("topic", "queue_id")
                .agg(F.count("*").alias("n"), F.min("offset").alias("lo"),
                     F.max("offset").alias("hi")).collect())
        for topic, queue_id, count, lo, hi in sorted(rows, key=lambda r: r[1]):
            if topic != TOPIC or queue_id not in QUEUE_IDS:
                return f"groupBy: a queue nobody wrote: {topic}/{queue_id}"
            if lo != 0 or hi - lo + 1 != count:
                return f"groupBy: queue {queue_id} has {count} rows for offsets {lo}..{hi}"
            problem = self._grew(queue_id, count, "groupBy")
            if problem:
                return problem
        return None

    def one_queue(self, queue_id: int) -> str | None:
        """Offsets and bodies of one queue, from a little before the end last seen
        (so the read spans sealed segments and the active one)."""
        start = max(0, self.ends[queue_id] - TAIL)
        rows = (self.frame(topic=TOPIC, queue_id=str(queue_id), offset_from=str(start))
                .select("offset", "body").collect())
        offsets = sorted(r[0] for r in rows)
        if offsets != list(range(start, start + len(offsets))):
            missing = sorted(set(range(start, start + len(offsets))) - set(offsets))[:5]
            return (f"queue {queue_id}: {len(offsets)} offsets from {start} are not contiguous "
                    f"(first {offsets[:1]}, missing {missing})")
        for offset, stored in rows:
            body = bytes(stored)
            if not 10 <= len(body) <= 1500:
                return f"queue {queue_id} offset {offset}: a body of {len(body)} bytes"
            if body != self.written.body(queue_id, offset):
                return f"queue {queue_id} offset {offset}: not the body the writer wrote"
        return self._grew(queue_id, start + len(offsets), "offsets and bodies")


def attempt(query: Callable[[], str | None]) -> str | None:
    try:
        return query()
    except Exception as exc:  # every failure is a finding
        return f"{type(exc).__name__}: {str(exc)[-3000:]}"


def warm_up(spark: Any, path: Path) -> None:
    """One read of a small store first: the session's first job (JVM classes, Python
    workers importing the reader) takes seconds, not to be spent beside the writer."""
    with MessageStore.open(writer_config(path)) as store:
        for queue_id in QUEUE_IDS:  # a partition each: every Python worker warms up
            store.append(TOPIC, queue_id, b"warm")
    frame = spark.read.format("tieredstore").option("path", str(path)).load()
    assert frame.count() == len(QUEUE_IDS)


@pytest.mark.spark
@pytest.mark.slow
def test_spark_reads_beside_a_live_writer(spark: Any, tmp_path: Path) -> None:
    warm_up(spark, tmp_path / "warm")
    data = tmp_path / "data"
    writer = subprocess.Popen([sys.executable, "-m", "tests.cli.live_writer", str(data),
                               str(SECONDS)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "OPEN"
    reads = Reads(spark, data)
    runs: list[tuple[str, str | None]] = []
    started = time.monotonic()
    try:
        while time.monotonic() < started + SECONDS - 1:
            runs.append(("count", attempt(reads.count)))
            runs.append(("groupBy", attempt(reads.per_queue)))
            for _ in range(TAIL_ROUNDS):
                for queue_id in QUEUE_IDS:
                    runs.append((f"queue {queue_id}", attempt(partial(reads.one_queue, queue_id))))
    finally:
        writer.wait(timeout=SECONDS + 60)
    elapsed = time.monotonic() - started
    done = writer.stdout.read()
    assert "DONE" in done, done
    rounds = int(done.split("DONE")[1].split()[0])
    failed = [(name, problem) for name, problem in runs if problem is not None]
    print(f"\n{len(runs)} Spark queries in {elapsed:.1f} s beside the writer, {len(failed)} "
          f"failed; the writer appended {rounds} messages to each of {len(QUEUE_IDS)} queues")
    assert not failed, f"{len(failed)} of {len(runs)} queries failed beside the writer:\n" + \
        "\n".join(f"{name}: {problem}" for name, problem in failed[:3])
    assert len(runs) >= 5 and max(reads.ends.values()) > 0, "too few queries ran"

    # The writer is done: Spark reads every message, as the store returns it.
    got: dict[int, list[tuple[Any, ...]]] = {q: [] for q in QUEUE_IDS}
    for row in reads.frame().selectExpr(
            "topic", "queue_id", "offset", "body", "unix_millis(store_timestamp)", "keys",
            "tags", "properties").collect():
        assert row[0] == TOPIC
        got[row[1]].append((row[2], bytes(row[3]), row[4], list(row[5]), row[6],
                            dict(row[7])))
    with MessageStore.open(writer_config(data)) as store:
        assert sorted(store.queues()) == [(TOPIC, q) for q in QUEUE_IDS]
        for queue_id in QUEUE_IDS:
            want: list[tuple[Any, ...]] = []
            offset, end = store.min_offset(TOPIC, queue_id), store.max_offset(TOPIC, queue_id)
            while offset < end:
                messages = store.get(TOPIC, queue_id, offset, max_count=1000)
                assert messages, f"the store returned nothing at {TOPIC}/{queue_id}@{offset}"
                want.extend((m.offset, m.body, m.store_timestamp, list(m.keys), m.tags,
                             dict(m.properties)) for m in messages)
                offset = messages[-1].offset + 1
            assert end == rounds, f"queue {queue_id} holds {end} messages, {rounds} written"
            mine = sorted(got[queue_id])
            assert len(mine) == len(want), f"queue {queue_id}: {len(mine)} read, {len(want)}"
            assert mine == want, f"queue {queue_id}: the Spark read differs from the store"
            assert [w[1] for w in want] == [reads.written.body(queue_id, o)
                                            for o in range(rounds)]


class MergeOnFirstGet(ForwardingObjectStore):
    """Runs ``before`` once, just before the first GET of a key holding ``kind``
    once armed: after the segment (and the log) was listed, before its bytes are
    read. ``gone``: that object was deleted by then."""

    def __init__(self, inner: Any, kind: str) -> None:
        super().__init__(inner)
        self.kind = kind
        self.before: Callable[[], Any] | None = None
        self.gone = False

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        if self.before is not None and self.kind in key:
            before, self.before = self.before, None
            await before()
            try:
                await self.inner.head(key)
            except ObjectNotFound:
                self.gone = True
        return await super().get_object(key, byte_range)


# The active segment's bytes are in chunks (write mode direct), or in log objects
# that the writer's compaction deletes once spent (write mode log, no safety age).
@pytest.mark.parametrize(("mode", "kind"), [("direct", "/consumequeue/seg"),
                                            ("direct", "/commitlog/seg"),
                                            ("log", "/log/log-")])
def test_a_segment_merged_between_listing_and_reading(tmp_path: Path, mode: str,
                                                      kind: str) -> None:
    """The writer seals and merges the active segment a task listed, before the task
    reads its bytes: the task reads the merged object, every message listed."""
    config = writer_config(tmp_path).replace(write_mode=mode, gc_safety_age=0.0)

    async def run() -> list[int]:
        writer = await AsyncMessageStore.open(config)
        for i in range(10):
            await writer.append(TOPIC, 0, b"%d" % i * 50)
        await writer.flush()

        async def roll_and_merge() -> None:
            for i in range(10, 400):  # rolls both segments; closing waits for the merges
                await writer.append(TOPIC, 0, b"%d" % i * 50)
            await writer.flush()
            await writer.compact_log(time.time() + 2 * config.log_compact_age)
            await writer.close()

        inner = open_object_store(config)
        store = MergeOnFirstGet(inner, kind)
        fetcher = reading_fetcher(store, config)
        selection = Selection()
        offsets: list[int] = []
        try:
            parts = await plan_read(store, config, selection)
            assert [(p.sealed, p.first_offset) for p in parts] == [(False, 0)]
            store.before = roll_and_merge
            async for batch in scan_slice(config, parts[0], selection.wants,
                                          on=(store, fetcher)):
                assert batch.columns is not None
                offsets.extend(batch.columns.offsets().tolist())
            assert store.gone, "the writer did not merge the segment the task listed"
        finally:
            await fetcher.close()
            await inner.close()
        return offsets

    # The ten messages the task's listing of the consume queue held, then the
    # records its listing of the commit log held past them (the durable tail:
    # how many depends on when the merge came), one after another.
    got = asyncio.run(run())
    assert got == list(range(len(got))) and len(got) >= 10, got
