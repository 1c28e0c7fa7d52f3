"""Managed ledgers: offload_prefix, one offload at a time, triggers, the
deletion lag, read priority, pages and the first pointer, recovery."""

from __future__ import annotations

import asyncio
import uuid as uuid_mod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.ledger.helpers import Clock, FaultyStore, InjectedFault, MiB, offload_objects
from tests.metadata.helpers import DamagedReads
from tieredstore.errors import ConfigError
from tieredstore.ledger import (
    CorruptManagedLedger,
    LocalLedgerStore,
    LocalReadHandle,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFenced,
    NoOffloader,
    OffloadedReadHandle,
    OffloadInProgress,
    OffloadOptions,
    Position,
    PositionOutOfRange,
    ReadHandle,
    ReadPriority,
    SegmentLedgerOffloader,
)
from tieredstore.ledger.managed import ManagedLedgerMetadata, ManagedLedgerPath
from tieredstore.ledger.managed.meta import state
from tieredstore.ledger.managed.meta.format import offload_uuid
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.tasks import Priority, current_priority
from tieredstore.testing import ForwardingObjectStore

HOUR = 3600.0


class TrackingOffloader(SegmentLedgerOffloader):
    """Counts concurrent offloads, checks the uuid is recorded before each
    attempt, and can hold attempts at a gate."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__(store, options=OffloadOptions(block_size=5 * MiB))
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()
        self.active = self.max_active = 0
        self.ml: ManagedLedger | None = None
        self.order: list[int] = []

    async def offload(self, handle: ReadHandle, uuid: uuid_mod.UUID,
                      extra_metadata: Mapping[str, str]) -> None:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        self.order.append(handle.ledger_id)
        try:
            assert self.ml is not None
            info = await self.ml.meta.ledger(handle.ledger_id)
            assert info is not None and offload_uuid(info) == uuid, "uuid not recorded first"
            assert not info.offloadContext.complete
            assert extra_metadata["ManagedLedgerName"] == self.ml.name
            self.started.set()
            await self.gate.wait()
            await super().offload(handle, uuid, extra_metadata)
        finally:
            self.active -= 1


@dataclass
class Env:
    store: ObjectStore
    ledgers: LocalLedgerStore
    offloader: TrackingOffloader
    clock: Clock

    async def open(self, name: str = "tenant/ns/persistent/t", **config: Any) -> ManagedLedger:
        config.setdefault("auto_offload", False)
        ml = await ManagedLedger.open(
            name, metadata_store=self.store, ledgers=self.ledgers, offloader=self.offloader,
            config=ManagedLedgerConfig(**config), clock=self.clock,
        )
        self.offloader.ml = ml
        return ml


@pytest.fixture
def env(tmp_path: Path) -> Env:
    store = MemoryObjectStore()
    return Env(store, LocalLedgerStore(tmp_path / "ledgers", fsync=False),
               TrackingOffloader(store), Clock())


async def fill(ml: ManagedLedger, ledgers: int, entries: int = 3, size: int = 100,
               clock: Clock | None = None) -> list[Position]:
    """``ledgers`` sealed ledgers of ``entries`` entries of ``size`` bytes."""
    out = []
    for n in range(ledgers):
        for i in range(entries):
            out.append(await ml.add_entry(bytes([n % 256, i % 256]) * (size // 2)))
        if clock is not None:
            clock.advance(60)
        await ml.rollover()
    return out


def offloaded(ml: ManagedLedger) -> list[int]:
    return [i.ledgerId for i in ml.meta.head.ledgers if i.offloadContext.complete]


# --- configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"offload_threshold_bytes": 100, "retention_bytes": 100}, "offload_threshold_bytes"),
    ({"offload_threshold_bytes": 200, "retention_bytes": 100}, "offload_threshold_bytes"),
    ({"offload_threshold_seconds": HOUR, "retention_seconds": HOUR},
     "offload_threshold_seconds"),
    ({"offload_threshold_bytes": -1}, "offload_threshold_bytes"),
    ({"deletion_lag_seconds": -5}, "deletion_lag_seconds"),
    ({"read_priority": "disk-first"}, "read_priority"),
    ({"max_entries_per_ledger": 0}, "max_entries_per_ledger"),
])
def test_config_is_refused_naming_the_key(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        ManagedLedgerConfig(**kwargs)
    assert err.value.key == key and key in str(err.value)


def test_config_defaults_and_parsing() -> None:
    config = ManagedLedgerConfig(read_priority="bookkeeper-first",  # type: ignore[arg-type]
                                 offload_threshold_bytes=10, retention_bytes=11)
    assert config.read_priority is ReadPriority.BOOKKEEPER_FIRST
    assert ManagedLedgerConfig().deletion_lag_seconds == 4 * HOUR
    assert ManagedLedgerConfig().read_priority is ReadPriority.TIERED_STORAGE_FIRST


# --- writing and rollover ----------------------------------------------------------------


async def test_rollover_writes_only_the_head(env: Env) -> None:
    ml = await env.open(page_size=2)
    await fill(ml, 3)
    store = env.store
    assert isinstance(store, MemoryObjectStore)
    store.metrics.reset()
    await ml.add_entry(b"x")
    await ml.rollover()
    requests = dict(store.metrics.requests)
    assert requests.pop("put") == 1  # one head, no page
    assert requests.pop("list") == 1  # the listing that confirms it
    assert set(requests) <= {"delete"}  # the head two versions back
    keys = [o.key for o in await store.list_all("")
            if "/live-" not in o.key]  # but the owner's liveness record
    assert all("/head-" in k for k in keys) and len(keys) == 2


async def test_entries_read_back_and_empty_ledgers_are_dropped(env: Env) -> None:
    ml = await env.open(max_entries_per_ledger=4)
    positions = [await ml.add_entry(b"e%d" % i) for i in range(10)]
    assert [p.ledger_id for p in positions] == [0] * 4 + [1] * 4 + [2] * 2
    await ml.rollover()
    await ml.rollover()  # ledger 3 had no entries: dropped, and deleted
    assert [i.ledgerId for i in await ml.ledger_infos()] == [0, 1, 2, 4]
    assert not await env.ledgers.exists(3)
    for i, p in enumerate(positions):
        assert (await ml.read_entry(p)).payload == b"e%d" % i
    with pytest.raises(PositionOutOfRange):
        await ml.read_entries(3, 0, 0)


async def test_an_owner_that_does_not_append_creates_no_managed_ledger(env: Env) -> None:
    """Offload, trim and sweep owners (``appending=False``) open only a managed
    ledger that exists: a misspelt name is an error, and writes nothing."""
    with pytest.raises(ManagedLedgerError, match="no such managed ledger"):
        await ManagedLedger.open("tenant/ns/persistent/typo", metadata_store=env.store,
                                 ledgers=env.ledgers, offloader=env.offloader,
                                 appending=False)
    assert await env.store.list_all("") == []
    ml = await env.open()
    await ml.close()
    again = await ManagedLedger.open("tenant/ns/persistent/t", metadata_store=env.store,
                                     ledgers=env.ledgers, offloader=env.offloader,
                                     appending=False)
    await again.close()


async def test_reopen_recovers_the_open_ledger_and_fences_its_writer(env: Env) -> None:
    first = await env.open()
    await first.add_entries([b"a", b"b", b"c"])
    second = await env.open()  # a new owner: fences ledger 0, starts ledger 1
    info = await second.meta.ledger(0)
    assert info is not None and info.entries == 3 and second.current_ledger_id == 1
    with pytest.raises(ManagedLedgerFenced):
        await first.add_entry(b"d")
    assert [e.payload for e in await second.read_entries(0, 0, 2)] == [b"a", b"b", b"c"]
    with pytest.raises(ManagedLedgerFenced):
        await first.rollover()


# --- offloading -----------------------------------------------------------------------------


async def test_offload_prefix_one_ledger_at_a_time(env: Env) -> None:
    ml = await env.open()
    await fill(ml, 4)
    assert await ml.offload_prefix(Position(2, 0)) == Position(2, 0)
    assert offloaded(ml) == [0, 1]
    assert env.offloader.order == [0, 1] and env.offloader.max_active == 1
    # Past the current ledger: every sealed ledger, never the open one.
    assert await ml.offload_prefix(Position(99, 0)) == Position(4, 0)
    assert offloaded(ml) == [0, 1, 2, 3]
    info = await ml.meta.ledger(3)
    assert info is not None
    ctx = info.offloadContext
    assert ctx.complete and not ctx.bookkeeperDeleted and ctx.timestamp == int(env.clock() * 1000)
    assert ctx.driverMetadata.name == "tieredstore"
    assert {p.key for p in ctx.driverMetadata.properties} >= {"prefix", "store"}
    assert len(await offload_objects(env.store)) == 4


async def test_a_concurrent_offload_is_refused(env: Env) -> None:
    ml = await env.open(offload_threshold_bytes=0)
    await fill(ml, 3)
    env.offloader.gate.clear()
    running = asyncio.create_task(ml.offload_prefix(Position(2, 0)))
    await env.offloader.started.wait()
    with pytest.raises(OffloadInProgress, match="an offload is running"):
        await ml.offload_prefix(Position(3, 0))
    assert await ml.maybe_offload() is None  # the trigger backs off...
    env.offloader.gate.set()
    assert await running == Position(2, 0)
    await ml.wait_idle()  # ...and runs again once the running offload is done
    assert offloaded(ml) == [0, 1, 2]
    assert env.offloader.max_active == 1


async def test_size_trigger(env: Env) -> None:
    ml = await env.open(offload_threshold_bytes=2500, retention_bytes=10**9)
    await fill(ml, 5, entries=10, size=100)  # 1000 bytes each
    await ml.add_entries([bytes(100)] * 4)  # 400 in the open ledger
    # Newest first: 400 + 1000 (4) + 1000 (3) = 2400; + 1000 (2) passes 2500.
    assert await ml.maybe_offload() == Position(3, 0)
    assert offloaded(ml) == [0, 1, 2]
    assert await ml.maybe_offload() is None


async def test_age_trigger(env: Env) -> None:
    ml = await env.open(offload_threshold_seconds=HOUR, retention_seconds=10 * HOUR)
    await fill(ml, 3, clock=env.clock)  # closed at t+60, t+120, t+180
    assert await ml.maybe_offload() is None
    env.clock.advance(HOUR - 120)  # ledger 0 closed an hour ago, 1 and 2 not yet
    assert await ml.maybe_offload() == Position(1, 0)
    env.clock.advance(60)
    assert await ml.maybe_offload() == Position(2, 0)
    assert offloaded(ml) == [0, 1]


async def test_triggers_run_after_rollover(env: Env) -> None:
    ml = await env.open(auto_offload=True, offload_threshold_bytes=0)
    await fill(ml, 2)
    await ml.wait_idle()
    assert offloaded(ml) == [0, 1]


async def test_no_offloader(env: Env) -> None:
    ml = await ManagedLedger.open("t", metadata_store=env.store, ledgers=env.ledgers)
    await fill(ml, 1)
    with pytest.raises(NoOffloader):
        await ml.offload_prefix(Position(1, 0))


# --- deletion lag and read priority ---------------------------------------------------------


async def test_local_copy_is_deleted_only_after_the_lag(env: Env) -> None:
    ml = await env.open()
    await fill(ml, 2)
    assert await ml.delete_offloaded_local_copies() == []  # not offloaded: never
    await ml.offload_prefix(Position(2, 0))
    env.clock.advance(4 * HOUR - 1)
    assert await ml.delete_offloaded_local_copies() == []
    assert await env.ledgers.exists(0) and await env.ledgers.exists(1)
    env.clock.advance(1)
    assert await ml.delete_offloaded_local_copies() == [0, 1]
    assert not await env.ledgers.exists(0) and not await env.ledgers.exists(1)
    for ledger_id in (0, 1):
        info = await ml.meta.ledger(ledger_id)
        assert info is not None and info.offloadContext.bookkeeperDeleted
        assert (await ml.read_entries(ledger_id, 0, 2))[2].entry_id == 2


async def test_the_deletion_lag_sweep_runs_in_the_background(env: Env) -> None:
    ml = await env.open(sweep_interval_seconds=0.02)
    await fill(ml, 2)
    await ml.offload_prefix(Position(2, 0))
    await asyncio.sleep(0.1)  # several passes, the lag not passed yet: nothing goes
    assert await env.ledgers.exists(0) and await env.ledgers.exists(1)
    env.clock.advance(4 * HOUR)
    for _ in range(200):
        if not await env.ledgers.exists(1):
            break
        await asyncio.sleep(0.01)
    assert not await env.ledgers.exists(0) and not await env.ledgers.exists(1)
    infos = await ml.ledger_infos()
    assert [i.offloadContext.bookkeeperDeleted for i in infos[:2]] == [True, True]
    await ml.close()  # stops the sweep


class PriorityRecorder(ForwardingObjectStore):
    """Records the priority each head write was sent at."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.heads: list[Priority] = []

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        if "/head-" in key:
            self.heads.append(current_priority())
        return await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


async def test_the_deletion_lag_sweep_sends_its_requests_as_garbage_collection(
        tmp_path: Path) -> None:
    # The sweep is background work (tasks.Priority.GC): its head writes must not
    # go at the host's priority, before the host's own requests.
    store = PriorityRecorder(MemoryObjectStore())
    env = Env(store, LocalLedgerStore(tmp_path / "ledgers", fsync=False),
              TrackingOffloader(store), Clock())
    ml = await env.open(sweep_interval_seconds=0.02)
    await fill(ml, 2)
    await ml.offload_prefix(Position(2, 0))
    before = len(store.heads)
    env.clock.advance(4 * HOUR)
    for _ in range(200):
        if not await env.ledgers.exists(1):
            break
        await asyncio.sleep(0.01)
    assert not await env.ledgers.exists(1)
    await ml.close()
    swept = store.heads[before:]
    assert swept and set(swept) == {Priority.GC}, swept


async def test_local_copy_stays_while_the_offload_is_not_recorded_complete(
    tmp_path: Path,
) -> None:
    store = FaultyStore(MemoryObjectStore())
    env = Env(store, LocalLedgerStore(tmp_path, fsync=False), TrackingOffloader(store), Clock())
    ml = await env.open()
    await fill(ml, 1)
    store.fail("put", 2, match="/head-")  # the head that would record it complete
    with pytest.raises(InjectedFault):
        await ml.offload_prefix(Position(1, 0))
    env.clock.advance(100 * HOUR)
    assert await ml.delete_offloaded_local_copies() == []
    assert await env.ledgers.exists(0)
    assert await offload_objects(store) == {}  # the attempt was cleaned up


@pytest.mark.parametrize("priority", list(ReadPriority))
async def test_read_priority(env: Env, priority: ReadPriority) -> None:
    ml = await env.open(read_priority=priority)
    await fill(ml, 1)
    assert isinstance(await ml.read_handle(0), LocalReadHandle)  # only copy
    await ml.offload_prefix(Position(1, 0))
    both = await ml.read_handle(0)
    expected = OffloadedReadHandle if priority is ReadPriority.TIERED_STORAGE_FIRST \
        else LocalReadHandle
    assert isinstance(both, expected)
    env.clock.advance(4 * HOUR)
    await ml.delete_offloaded_local_copies()
    assert isinstance(await ml.read_handle(0), OffloadedReadHandle)  # only copy
    assert [e.entry_id for e in await ml.read_entries(0, 0, 2)] == [0, 1, 2]


async def test_bookkeeper_first_falls_back_when_the_local_copy_is_gone(env: Env) -> None:
    ml = await env.open(read_priority=ReadPriority.BOOKKEEPER_FIRST)
    await fill(ml, 1)
    await ml.offload_prefix(Position(1, 0))
    await env.ledgers.delete_ledger(0)  # e.g. deleted, and the flag not yet recorded
    assert isinstance(await ml.read_handle(0), OffloadedReadHandle)


# --- pages and the first pointer ----------------------------------------------------------------


async def test_immutable_ledgers_move_to_pages_and_trim_moves_first(env: Env) -> None:
    ml = await env.open(page_size=2)
    positions = await fill(ml, 7)
    await ml.offload_prefix(Position(7, 0))
    assert ml.meta.page_writes == 0  # offloaded but still local: mutable
    env.clock.advance(4 * HOUR)
    await ml.delete_offloaded_local_copies()
    head = ml.meta.head
    assert ml.meta.page_writes == 3 and head.pagedThrough == 6
    assert [i.ledgerId for i in head.ledgers] == [6, 7]  # one pageable left, the open one
    assert (head.pagedLedgers, head.pagedEntries) == (6, 18)
    pages = await ml.meta.page_view()
    assert [(p.first_ledger, p.last_ledger, p.count) for p in pages] == [(0, 1, 2), (2, 3, 2),
                                                                         (4, 5, 2)]
    # A fresh instance reads a paged ledger's record from its page.
    await ml.close()
    ml = await env.open(page_size=2)
    env.store.metrics.reset()
    assert (await ml.read_entry(positions[3 * 3 + 1])).entry_id == 1  # ledger 3
    assert env.store.metrics.requests["list"] >= 1  # the page keys, listed once
    # Trimming moves the first pointer; pages wholly behind it go.
    assert await ml.trim(3) == 3
    assert [(p.first_ledger, p.last_ledger) for p in await ml.meta.page_view()] == [(2, 3),
                                                                                   (4, 5)]
    page_keys = [o.key for o in await env.store.list_all(ml.meta.path.pages_prefix)]
    assert len(page_keys) == 2
    assert ml.meta.head.pagedLedgers == 3 and ml.meta.head.pagedEntries == 9
    with pytest.raises(PositionOutOfRange):
        await ml.read_entries(2, 0, 0)
    assert (await ml.read_entries(3, 0, 0))[0].entry_id == 0
    assert sorted(int(n.rsplit("-", 1)[1]) for n in await offload_objects(env.store)) == [
        3, 4, 5, 6]
    # Never past the open ledger (8: the reopen dropped the empty ledger 7).
    assert await ml.trim(99) == ml.current_ledger_id == 8
    assert await ml.meta.page_view() == []
    assert await env.store.list_all(ml.meta.path.pages_prefix) == []
    assert await offload_objects(env.store) == {}
    assert await env.ledgers.ledger_ids() == [8]


def flip_a_byte(data: bytes) -> bytes:
    return data[:-3] + bytes([data[-3] ^ 0x40]) + data[-2:]


async def test_a_page_read_damaged_on_the_way_is_read_again(env: Env) -> None:
    """As queue pages: a page that fails its checks is read again; only damage
    that repeats is believed."""
    ml = await env.open(page_size=2)
    await fill(ml, 3)
    await ml.offload_prefix(Position(3, 0))
    env.clock.advance(4 * HOUR)
    await ml.delete_offloaded_local_copies()
    assert ml.meta.head.pagedThrough == 2
    path = ml.meta.path
    await ml.close()
    damaged_once = DamagedReads(env.store, "/pages/", 1, flip_a_byte)
    once = await ManagedLedgerMetadata.open(damaged_once, path)
    info = await once.ledger(1)
    assert info is not None and info.ledgerId == 1
    damaged_at_rest = DamagedReads(env.store, "/pages/", 99, flip_a_byte)
    at_rest = await ManagedLedgerMetadata.open(damaged_at_rest, path)
    with pytest.raises(CorruptManagedLedger, match="pages/"):
        await at_rest.ledger(1)


async def test_retention_trims_the_oldest(env: Env) -> None:
    ml = await env.open(retention_bytes=2500, retention_seconds=10 * HOUR)
    await fill(ml, 5, entries=10, size=100, clock=env.clock)  # 1000 bytes each
    # 5000 bytes: dropping 0 and 1 leaves 3000 >= 2500; dropping 2 would leave 2000.
    assert await ml.apply_retention() == 2
    assert [i.ledgerId for i in await ml.ledger_infos()] == [2, 3, 4, 5]
    env.clock.advance(10 * HOUR - 110)  # ledger 2, closed at +180, is now past retention
    assert await ml.apply_retention() == 3
    assert await ml.apply_retention() is None


async def test_a_page_whose_head_never_landed_is_adopted(tmp_path: Path) -> None:
    """The head write that would reference a new page fails: the page is there,
    unreferenced; the next write cuts the same page (same bytes, same key) and
    references it. No stray page is left."""
    store = FaultyStore(MemoryObjectStore())
    env = Env(store, LocalLedgerStore(tmp_path, fsync=False), TrackingOffloader(store), Clock())
    ml = await env.open(page_size=2)
    await fill(ml, 2)
    await ml.offload_prefix(Position(2, 0))
    env.clock.advance(4 * HOUR)
    store.fail("put", 1, match="/head-")
    with pytest.raises(InjectedFault):
        await ml.delete_offloaded_local_copies()
    pages = await store.list_all(ml.meta.path.pages_prefix)
    assert len(pages) == 1 and ml.meta.head.pagedThrough == 0
    store.disarm()
    assert await ml.delete_offloaded_local_copies() == [0, 1]
    assert ml.meta.head.pagedThrough == 2
    assert [r.key for r in await ml.meta.page_view()] == [p.key for p in pages]
    assert [e.entry_id for e in await ml.read_entries(1, 0, 2)] == [0, 1, 2]


async def test_two_writers_of_the_metadata_one_is_fenced(env: Env) -> None:
    path = ManagedLedgerPath("root", "t")
    a = await ManagedLedgerMetadata.open(env.store, path, writer_id="a")
    await a.update(lambda head: state.add_ledger(head, 0))
    b = await ManagedLedgerMetadata.open(env.store, path, writer_id="b")
    await b.update(lambda head: state.close_open_ledger(head, entries=1, size=1,
                                                       timestamp_ms=1))
    with pytest.raises(ManagedLedgerFenced):
        await a.update(lambda head: state.close_open_ledger(head, entries=2, size=2,
                                                           timestamp_ms=2))
    with pytest.raises(ManagedLedgerFenced):
        await a.update(lambda head: None)
    info = await b.ledger(0)
    assert info is not None and info.entries == 1


class HookBeforeHead(MemoryObjectStore):
    """Runs ``hook`` once, before the first head create after it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Any = None

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> Any:
        if self.hook is not None and "/head-" in key:
            hook, self.hook = self.hook, None
            await hook()
        return await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


async def test_the_newest_open_wins_a_race_with_the_old_owners_head_write(
        tmp_path: Path) -> None:
    """The old owner writes a head between the new owner's load and its first
    head write: the new owner loads again and takes over; it is never fenced."""
    store = HookBeforeHead()
    env = Env(store, LocalLedgerStore(tmp_path / "ledgers", fsync=False),
              TrackingOffloader(store), Clock())
    old = await env.open()
    await fill(old, 2)
    store.hook = lambda: old.offload_prefix(Position(1, 0))  # a head write of the old owner
    new = await env.open()
    assert store.hook is None, "the race did not happen"
    assert offloaded(new) == [0]  # the old owner's write is in the head the new one took
    with pytest.raises(ManagedLedgerFenced):
        await old.add_entry(b"zombie")
    position = await new.add_entry(b"new owner")
    assert (await new.read_entry(position)).payload == b"new owner"


async def test_a_batch_larger_than_a_ledger_fills_ledgers_to_their_limits(env: Env) -> None:
    ml = await env.open(max_entries_per_ledger=1500)
    payloads = [b"e%d" % i for i in range(3100)]
    positions = await ml.add_entries(payloads)
    assert [p.ledger_id for p in positions] == [0] * 1500 + [1] * 1500 + [2] * 100
    assert [p.entry_id for p in positions] == [*range(1500), *range(1500), *range(100)]
    for i in (0, 1499, 1500, 3099):
        assert (await ml.read_entry(positions[i])).payload == payloads[i]
    sized = await env.open(max_entries_per_ledger=100, max_ledger_bytes=1000)
    first = sized.current_ledger_id
    got = await sized.add_entries([b"x" * 400] * 5 + [b"y" * 3000])
    assert [p.ledger_id - first for p in got] == [0, 0, 1, 1, 2, 3]
