"""``tieredstore-ledger``: offloaded ledgers as rows, equal to ``read_offloaded``;
selections that read only the chosen ledger's objects and blocks."""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.ledger.helpers import make_ledger
from tests.spark.test_read import RecordingStore
from tieredstore.ledger import (
    LedgerSelection,
    LocalLedgerStore,
    OffloadNamespace,
    OffloadOptions,
    SegmentLedgerOffloader,
    plan_ledger_slices,
    read_ledger_slice,
)
from tieredstore.ledger.offload.location import parse_offload_key
from tieredstore.objectstore import LocalObjectStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MiB = 1024 * 1024
SPACE = OffloadNamespace()


@dataclass
class Offloaded:
    path: Path
    entries: dict[int, list[bytes]]  # by ledger id
    uuids: dict[int, str]
    names: dict[int, str]

    @property
    def options(self) -> dict[str, str]:
        return {"path": str(self.path)}

    def rows(self, ledger_id: int, lo: int = 0, hi: int = 2**62) -> list[tuple[Any, ...]]:
        return [(self.names[ledger_id], ledger_id, i, e, self.uuids[ledger_id])
                for i, e in enumerate(self.entries[ledger_id]) if lo <= i < hi]


async def _offload(root: Path) -> Offloaded:
    rng = random.Random(11)
    source = LocalLedgerStore(root / "ledgers", fsync=False)
    store = LocalObjectStore(root / "store", fsync=False)
    off = SegmentLedgerOffloader(store, options=OffloadOptions(block_size=5 * MiB))
    built = Offloaded(root / "store", {}, {}, {})
    try:
        # 12 MiB: three blocks; 1 MiB: one; 6 MiB: two; entries of 0 to 64 KiB
        for n, size in enumerate((12 * MiB, 1 * MiB, 6 * MiB)):
            payloads: list[bytes] = []
            while sum(map(len, payloads)) < size:
                payloads.append(rng.randbytes(rng.choice((0, 100, 4096, 65536))))
            handle = await make_ledger(source, payloads)
            attempt = uuid.UUID(int=rng.getrandbits(128))
            name = f"tenant/ns/persistent/topic-{n}"
            await off.offload(handle, attempt, {"ManagedLedgerName": name})
            built.entries[handle.ledger_id] = payloads
            built.uuids[handle.ledger_id] = str(attempt)
            built.names[handle.ledger_id] = name
        # An attempt that did not finish (no index) and one whose data is gone.
        first = min(built.entries)
        for broken in (uuid.UUID(int=1), uuid.UUID(int=2)):
            handle = await source.open_ledger(first)
            await off.offload(handle, broken, {})
        where = SPACE.locate(first, uuid.UUID(int=1))
        await store.delete(where.index_key)
        await store.delete(SPACE.locate(first, uuid.UUID(int=2)).data_key)
    finally:
        await off.close()
        await store.close()
    return built


@pytest.fixture(scope="module")
def offloaded(tmp_path_factory: pytest.TempPathFactory) -> Offloaded:
    return asyncio.run(_offload(tmp_path_factory.mktemp("ledgers")))


def collect(df: Any) -> list[tuple[Any, ...]]:
    return sorted((r.managed_ledger, r.ledger_id, r.entry_id, bytes(r.payload), r.offload_uuid)
                  for r in df.collect())


def test_rows_are_the_offloaded_entries(spark: Any, offloaded: Offloaded) -> None:
    df = spark.read.format("tieredstore-ledger").options(**offloaded.options).load()
    # One per 16 blocks of about 1 MiB of a complete attempt: one per ledger here.
    assert df.rdd.getNumPartitions() == 3
    assert collect(df) == sorted(r for ledger in offloaded.entries
                                 for r in offloaded.rows(ledger))


def test_options_select_ledgers_and_entries(spark: Any, offloaded: Offloaded) -> None:
    first, second, third = sorted(offloaded.entries)
    df = spark.read.format("tieredstore-ledger").options(
        **offloaded.options, ledger_id=f"{first},{third}", entry_from="10",
        entry_to="40").load()
    assert collect(df) == sorted(offloaded.rows(first, 10, 40) + offloaded.rows(third, 10, 40))
    by_name = spark.read.format("tieredstore-ledger").options(
        **offloaded.options, managed_ledger=offloaded.names[second]).load()
    assert collect(by_name) == offloaded.rows(second)


async def _read_one(offloaded: Offloaded, ledger_id: int, lo: int, hi: int
                    ) -> tuple[list[tuple[str, str]], list[tuple[str, str]], int, int]:
    store = RecordingStore(offloaded.path)
    try:
        slices = await plan_ledger_slices(store, SPACE, LedgerSelection(
            ledger_ids=frozenset([ledger_id]), entry_from=lo, entry_to=hi), blocks_per_slice=16)
        planning = list(store.touched)
        count = 0
        for part in slices:
            async for batch in read_ledger_slice(store, part):
                assert [e.entry_id for e in batch] == list(range(count + lo,
                                                                 count + lo + len(batch)))
                assert [e.payload for e in batch] == \
                    offloaded.entries[ledger_id][count + lo:count + lo + len(batch)]
                count += len(batch)
        return planning, store.touched[len(planning):], count, len(slices)
    finally:
        await store.close()


def name_of(key: str) -> int:
    name = parse_offload_key(key)
    assert name is not None
    return name.ledger_id


def _entries_in_block(offloaded: Offloaded, ledger_id: int) -> int:
    """An entry id inside the last block of a three-block ledger: past 10 MiB."""
    total, i = 0, 0
    for i, e in enumerate(offloaded.entries[ledger_id]):  # noqa: B007
        total += len(e)
        if total > 11 * MiB:
            break
    return i


def test_a_ledger_filter_reads_only_that_ledgers_objects(offloaded: Offloaded) -> None:
    big = max(offloaded.entries, key=lambda k: sum(map(len, offloaded.entries[k])))
    attempt = SPACE.locate(big, offloaded.uuids[big])
    lo = _entries_in_block(offloaded, big)
    planning, reading, count, slices = asyncio.run(
        _read_one(offloaded, big, lo, len(offloaded.entries[big])))
    assert count == len(offloaded.entries[big]) - lo
    assert slices == 1  # the entry range reaches the last blocks only
    lists = [k for op, k in planning if op == "list"]
    assert lists == ["managed-ledgers/ml/", SPACE.prefix + "/"]  # no metadata: none to read
    # Planning reads the ledger's indexes and heads their data objects (one
    # attempt's is gone: left out), nothing of another ledger; the task reads
    # only the complete attempt's objects.
    touched = [(op, k) for op, k in planning if op != "list"]
    assert ("get", attempt.index_key) in touched and ("head", attempt.data_key) in touched
    assert len(touched) == 4 and all(name_of(k) == big for _, k in touched), touched
    assert reading and all(k in attempt.keys for _, k in reading), reading


ML_NAME = "tenant/ns/persistent/recorded"


async def _managed_with_unrecorded_attempt(data: Path) -> dict[tuple[int, int], bytes]:
    """A managed ledger's four closed ledgers offloaded, and beside ledger 2's
    recorded attempt a second complete one its metadata does not record (what a
    zombie or an abandoned attempt leaves). Returns the entries by (ledger, entry)."""
    from tieredstore.config import load_config
    from tieredstore.ledger import LedgerHost, Position

    config = load_config(env={}, backend="local", local_path=str(data), local_fsync=False,
                         ledger_max_entries=20)
    host = LedgerHost.create(config, LocalObjectStore(data, fsync=False))
    entries: dict[tuple[int, int], bytes] = {}
    try:
        ml = await host.open(ML_NAME)
        payloads = [f"entry {n}".encode() for n in range(80)]
        for position, payload in zip(await ml.add_entries(payloads), payloads, strict=True):
            entries[(position.ledger_id, position.entry_id)] = payload
        await ml.rollover()
        await ml.offload_prefix(Position(max(k[0] for k in entries) + 1, 0))
        await ml.close()
        handle = await host.ledgers.open_ledger(2)
        await host.offloader.offload(handle, uuid.uuid4(), {"ManagedLedgerName": ML_NAME})
        await handle.close()
    finally:
        await host.close()
        await host.store.close()
    return entries


def test_rows_come_only_from_attempts_the_metadata_records_complete(
        spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    entries = asyncio.run(_managed_with_unrecorded_attempt(data))
    rows = [(r.managed_ledger, r.ledger_id, r.entry_id, bytes(r.payload)) for r in
            spark.read.format("tieredstore-ledger").options(path=str(data)).load().collect()]
    ids = [(ledger, entry) for _, ledger, entry, _ in rows]
    assert len(ids) == len(set(ids)), "duplicate (ledger_id, entry_id) rows"
    assert sorted(rows) == sorted((ML_NAME, ledger, entry, payload)
                                  for (ledger, entry), payload in entries.items())


async def _two_complete_attempts(root: Path) -> tuple[int, int]:
    """Offloads without managed-ledger metadata: ledger A offloaded twice,
    both attempts complete; ledger B once. Returns (A, B)."""
    source = LocalLedgerStore(root / "ledgers", fsync=False)
    store = LocalObjectStore(root / "store", fsync=False)
    off = SegmentLedgerOffloader(store, options=OffloadOptions(block_size=5 * MiB))
    try:
        twice = await make_ledger(source, [b"a"] * 10)
        once = await make_ledger(source, [b"b"] * 10)
        for attempt in (uuid.UUID(int=3), uuid.UUID(int=4)):
            await off.offload(twice, attempt, {})
        await off.offload(once, uuid.UUID(int=5), {})
        return twice.ledger_id, once.ledger_id
    finally:
        await off.close()
        await store.close()


def test_without_metadata_a_ledger_with_two_complete_attempts_is_refused(
        spark: Any, tmp_path: Path) -> None:
    twice, once = asyncio.run(_two_complete_attempts(tmp_path))
    reader = spark.read.format("tieredstore-ledger").options(path=str(tmp_path / "store"))
    with pytest.raises(Exception, match=f"ledger {twice}: 2 complete offload attempts"):
        reader.load().collect()
    rows = reader.options(ledger_id=str(once)).load().collect()
    assert sorted((r.ledger_id, r.entry_id) for r in rows) == [(once, i) for i in range(10)]
