"""Managed-ledger deletes come after the head write that drops what they delete
(docs/ledgers.md, *Managed-ledger metadata*): a replaced owner's trim, retention
or deletion-lag pass raises ManagedLedgerFenced and deletes nothing; a lost
reply is settled; what a crash between the head write and the deletes leaves
is removed by the local-copy pass and the offload sweep; a reader holding an
old head gets a clear error."""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.ledger.helpers import Clock, FaultyStore, InjectedFault, KiB, MiB, offload_objects
from tieredstore.config import TieredStoreConfig
from tieredstore.ledger import (
    LedgerHost,
    LocalLedgerStore,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFenced,
    OffloadOptions,
    Position,
    PositionOutOfRange,
    SegmentLedgerOffloader,
    sweep_offloads,
)
from tieredstore.ledger.handle import ReadHandle
from tieredstore.objectstore import MemoryObjectStore, ObjectStore

NAME = "tenant/ns/persistent/t"
HOUR = 3600.0


@dataclass
class Env:
    store: ObjectStore
    ledgers: LocalLedgerStore
    clock: Clock = field(default_factory=Clock)

    def offloader(self) -> SegmentLedgerOffloader:
        return SegmentLedgerOffloader(self.store, options=OffloadOptions(block_size=5 * MiB))

    async def open(self, writer_id: str, *, offloader: SegmentLedgerOffloader | None = None,
                   **config: Any) -> ManagedLedger:
        config.setdefault("auto_offload", False)
        return await ManagedLedger.open(
            NAME, metadata_store=self.store, ledgers=self.ledgers,
            offloader=offloader or self.offloader(), config=ManagedLedgerConfig(**config),
            writer_id=writer_id, clock=self.clock)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(FaultyStore(MemoryObjectStore()), LocalLedgerStore(tmp_path / "ledgers",
                                                                   fsync=False))


async def three_offloaded_ledgers(ml: ManagedLedger) -> dict[Position, bytes]:
    """Ledgers 0-2, 20 entries of 1 KiB each, closed and offloaded."""
    written: dict[Position, bytes] = {}
    for n in range(3):
        payloads = [bytes([n, i]) * (KiB // 2) for i in range(20)]
        for position, payload in zip(await ml.add_entries(payloads), payloads, strict=True):
            written[position] = payload
        await ml.rollover()
    await ml.offload_prefix(Position(3, 0))
    assert [i.ledgerId for i in await ml.ledger_infos() if i.offloadContext.complete] == [0, 1,
                                                                                          2]
    return written


async def unreadable(ml: ManagedLedger, written: dict[Position, bytes]) -> list[str]:
    """Each written entry that ``ml`` does not read back as written, and why."""
    failed = []
    for position, payload in written.items():
        try:
            got = (await ml.read_entry(position)).payload
        except Exception as exc:
            failed.append(f"{position}: {type(exc).__name__}")
            continue
        if bytes(got) != payload:
            failed.append(f"{position}: other bytes")
    return failed


async def attempts(store: ObjectStore) -> list[int]:
    """The ledger ids with offload objects in the bucket."""
    return sorted({int(name.rsplit("-", 1)[1]) for name in await offload_objects(store)})


@pytest.mark.parametrize("delete", ["retention", "trim"])
async def test_a_replaced_owner_deletes_nothing(env: Env, delete: str) -> None:
    """Issue 39: owner A (retention 1 KiB) holds three offloaded ledgers; owner B
    (retention off) takes over and appends; A's retention (or trim) raises
    ManagedLedgerFenced before it deletes anything, and B reads all 60 entries."""
    a = await env.open("a", retention_bytes=KiB)
    written = await three_offloaded_ledgers(a)
    b = await env.open("b")
    written[await b.add_entry(b"new owner")] = b"new owner"
    with pytest.raises(ManagedLedgerFenced):
        if delete == "retention":
            await a.apply_retention()
        else:
            await a.trim(2)
    assert await attempts(env.store) == [0, 1, 2]
    assert {0, 1, 2} <= set(await env.ledgers.ledger_ids())
    assert [i.ledgerId for i in await b.ledger_infos()][:3] == [0, 1, 2]
    assert await unreadable(b, written) == []
    await b.close()


async def test_a_replaced_owners_deletion_lag_pass_deletes_no_local_copy(env: Env) -> None:
    """The local copies the new owner's head still records stay on disk."""
    a = await env.open("a")
    written = await three_offloaded_ledgers(a)
    b = await env.open("b")
    env.clock.advance(5 * HOUR)
    with pytest.raises(ManagedLedgerFenced):
        await a.delete_offloaded_local_copies()
    assert {0, 1, 2} <= set(await env.ledgers.ledger_ids())
    rows = [(i.ledgerId, i.offloadContext.bookkeeperDeleted) for i in await b.ledger_infos()]
    assert rows[:3] == [(0, False), (1, False), (2, False)]
    assert await unreadable(b, written) == []
    assert await b.delete_offloaded_local_copies() == [0, 1, 2]
    assert not {0, 1, 2} & set(await env.ledgers.ledger_ids())
    assert await unreadable(b, written) == []


@pytest.mark.parametrize("landed", [True, False])
async def test_a_trims_lost_reply_is_settled(env: Env, landed: bool) -> None:
    """The head write's reply lost: settled at once. Landed: the deletes go on in
    the same call. Not landed: the error, nothing deleted; the next call trims."""
    assert isinstance(env.store, FaultyStore)
    ml = await env.open("a", retention_bytes=KiB)
    written = await three_offloaded_ledgers(ml)
    env.store.fail("put", match="/head-", after=landed)
    if landed:
        assert await ml.apply_retention() == 2
    else:
        with pytest.raises(InjectedFault):
            await ml.apply_retention()
        assert await attempts(env.store) == [0, 1, 2]
        assert await unreadable(ml, written) == []
        assert await ml.apply_retention() == 2
    assert env.store.fired == ["put#1"]
    assert await attempts(env.store) == [2]
    assert not {0, 1} & set(await env.ledgers.ledger_ids())
    kept = {p: d for p, d in written.items() if p.ledger_id == 2}
    assert await unreadable(ml, kept) == []
    with pytest.raises(PositionOutOfRange):
        await ml.read_entry(Position(0, 0))


async def test_what_a_crash_after_the_trim_leaves_is_deleted(env: Env) -> None:
    """The trim's head write stands, then its deletes stop (a crash, or a delete
    that fails): the offload attempts are the sweep's, the local copies the next
    owner's deletion-lag pass's."""
    assert isinstance(env.store, FaultyStore)
    a = await env.open("a")
    written = await three_offloaded_ledgers(a)
    env.store.fail("delete", match="offload/")
    with pytest.raises(InjectedFault):
        await a.trim(2)
    env.store.disarm()
    assert a.meta.head.firstLedgerId == 2
    assert await attempts(env.store) == [0, 1, 2]
    assert {0, 1, 2} <= set(await env.ledgers.ledger_ids())
    # The process dies here; the next owner opens the managed ledger.
    c = await env.open("c")
    kept = {p: d for p, d in written.items() if p.ledger_id == 2}
    assert await unreadable(c, kept) == []
    assert await c.delete_offloaded_local_copies() == []  # nothing due: the lag
    assert not {0, 1} & set(await env.ledgers.ledger_ids())
    assert 2 in await env.ledgers.ledger_ids()
    assert c.offloader is not None
    assert isinstance(c.offloader, SegmentLedgerOffloader)
    report = await sweep_offloads(c.offloader, env.store, safety_age=0)
    assert report.deleted == 2
    assert await attempts(env.store) == [2]
    assert await unreadable(c, kept) == []


async def test_the_local_copy_pass_leaves_other_managed_ledgers_alone(env: Env) -> None:
    """The local directory is shared: a pass deletes only its own managed
    ledger's leftovers, and no ledger above its newest recorded one."""
    other = await ManagedLedger.open("other", metadata_store=env.store, ledgers=env.ledgers,
                                     config=ManagedLedgerConfig(auto_offload=False))
    await other.add_entry(b"x")
    await other.rollover()  # the other's ledgers 0 (closed) and 1 (open)
    ml = await env.open("a")  # ledger 2
    await ml.add_entry(b"y")
    await ml.rollover()  # 2 closed, 3 open
    await ml.trim(3)
    mine = [("managed-ledger", NAME.encode())]
    await env.ledgers.create_ledger(ledger_id=2, custom_metadata=mine)  # a trim's leftover
    stray = await env.ledgers.create_ledger(custom_metadata=mine)  # 4: a rollover's, maybe
    assert await env.ledgers.ledger_ids() == [0, 1, 2, 3, 4]
    assert await ml.delete_offloaded_local_copies() == []
    assert await env.ledgers.ledger_ids() == [0, 1, 3, stray.ledger_id]
    assert [e.payload for e in await other.read_entries(0, 0, 0)] == [b"x"]


async def test_a_reader_whose_ledger_a_new_owner_trimmed_is_told_so(env: Env) -> None:
    """The replaced owner reads a ledger the new owner trimmed: fenced, not a
    missing object."""
    a = await env.open("a")
    await three_offloaded_ledgers(a)
    env.clock.advance(5 * HOUR)
    assert await a.delete_offloaded_local_copies() == [0, 1, 2]  # offloaded copies only
    b = await env.open("b")
    assert await b.trim(2) == 2
    with pytest.raises(ManagedLedgerFenced, match="ledger 0"):
        await a.read_entry(Position(0, 0))
    with pytest.raises(ManagedLedgerFenced):
        await a.add_entry(b"zombie")


class HookedOffloader(SegmentLedgerOffloader):
    """Runs ``hook`` once before it opens an offloaded ledger."""

    hook: Callable[[], Awaitable[Any]] | None = None

    async def read_offloaded(self, ledger_id: int, uuid: uuid_mod.UUID) -> ReadHandle:
        hook, self.hook = self.hook, None
        if hook is not None:
            await hook()
        return await super().read_offloaded(ledger_id, uuid)


async def test_ledger_read_of_a_ledger_trimmed_meanwhile_says_so(env: Env) -> None:
    """``tieredstore ledger read`` loaded the metadata, then the owner trimmed
    the ledger before its offload was read: PositionOutOfRange, trimmed."""
    ml = await env.open("a")
    await three_offloaded_ledgers(ml)
    offloader = HookedOffloader(env.store, options=OffloadOptions(block_size=5 * MiB))
    host = LedgerHost(TieredStoreConfig(ledger_root="managed-ledgers"), env.store,
                      env.ledgers, offloader)
    assert len(await host.read(NAME, 0, 0, 1)) == 2
    offloader.hook = lambda: ml.trim(1)
    with pytest.raises(PositionOutOfRange, match="trimmed"):
        await host.read(NAME, 0, 0, 1)
