"""Two owners of one managed ledger offload the same closed ledger.

The old owner (the zombie) keeps running after a new owner opened the
managed ledger. Both offload ledger 0, each through its own offloader on the
same bucket, in interleavings fixed by gates in the offloader:

- the zombie starts, the newer owner opens (and may offload), the zombie
  finishes;
- the newer owner offloads first, then the zombie tries;
- both use the same uuid, with the same bytes or different bytes (a
  different read block size): the data object's If-None-Match and writer
  token fence the second writer either way; an index of the same bytes is
  idempotent, of other bytes fenced.

Every case ends with: the newest metadata records exactly one offload, the
newer owner's; it reads back the original entries; the zombie got
ManagedLedgerFenced and never changed that record; the newer owner was
never fenced; and after the sweep the bucket holds the winner's offload
objects only, with no multipart upload left.

Then the sweep on its own (an attempt in flight is never touched, a damaged
newest head stops it, every managed ledger and page counts), and an owner
whose head write recorded its offload but lost the answer keeps the objects.
"""

from __future__ import annotations

import asyncio
import uuid as uuid_mod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ledger.helpers import (
    Clock,
    FaultyStore,
    InjectedFault,
    MiB,
    make_ledger,
    offload_objects,
)
from tieredstore.ledger import (
    CorruptManagedLedger,
    LocalLedgerStore,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFenced,
    ManagedLedgerMetadata,
    OffloadedReadHandle,
    OffloadOptions,
    Position,
    ReadHandle,
    SegmentLedgerOffloader,
)
from tieredstore.ledger.format import data_object_name
from tieredstore.ledger.index import OffloadIndex
from tieredstore.ledger.managed import ManagedLedgerPath, sweep_offloads
from tieredstore.ledger.managed import attempt as attempt_mod
from tieredstore.ledger.managed.meta.format import decode_head, offload_uuid
from tieredstore.ledger.offload.location import OffloadLocation
from tieredstore.ledger.stream import BlockPacker
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.objectstore.multipart import ObjectWriter
from tieredstore.segment.garbage import UNREFERENCED, UPLOAD

NAME = "tenant/ns/persistent/topic"
ROOT = "managed-ledgers"
SAFETY_AGE = 3600.0
LATER = timedelta(seconds=2 * SAFETY_AGE)
X = uuid_mod.UUID("5a4d3c2b-1a09-4f8e-9d7c-6b5a49382716")
POINTS = ("copy", "index")


class GatedOffloader(SegmentLedgerOffloader):
    """An offloader that can stop at two points of an attempt: ``copy``
    (after its listing found the attempt's names free, before the first
    part) and ``index`` (after the data object is written, before the index).
    ``read_block_size`` sets the data bytes (how entries are cut in blocks)."""

    def __init__(self, store: ObjectStore, *, read_block_size: int = MiB) -> None:
        super().__init__(store, options=OffloadOptions(block_size=5 * MiB,
                                                       read_block_size=read_block_size))
        self.gates = {p: asyncio.Event() for p in POINTS}
        self.reached = {p: asyncio.Event() for p in POINTS}
        for gate in self.gates.values():
            gate.set()
        self.uuids: list[uuid_mod.UUID] = []

    def hold(self, point: str) -> None:
        self.gates[point].clear()

    def release(self, point: str) -> None:
        self.gates[point].set()

    async def _pause(self, point: str) -> None:
        self.reached[point].set()
        await self.gates[point].wait()

    async def offload(self, handle: ReadHandle, uuid: uuid_mod.UUID,
                      extra_metadata: Mapping[str, str]) -> None:
        self.uuids.append(uuid)
        await super().offload(handle, uuid, extra_metadata)

    async def _copy_entries(self, handle: ReadHandle, packer: BlockPacker,
                            data: ObjectWriter) -> None:
        await self._pause("copy")
        await super()._copy_entries(handle, packer, data)

    async def _put_index(self, location: OffloadLocation, data: bytes,
                         user_metadata: Mapping[str, str]) -> None:
        await self._pause("index")
        await super()._put_index(location, data, user_metadata)


@dataclass
class Owners:
    """One bucket, one ledger directory, the zombie's and the newer owner's offloaders."""

    store: ObjectStore
    ledgers: LocalLedgerStore
    zombie_offloader: GatedOffloader
    newer_offloader: GatedOffloader
    clock: Clock = field(default_factory=Clock)
    entries: list[bytes] = field(default_factory=list)

    async def open(self, offloader: GatedOffloader, writer_id: str) -> ManagedLedger:
        return await ManagedLedger.open(
            NAME, metadata_store=self.store, ledgers=self.ledgers, offloader=offloader,
            config=ManagedLedgerConfig(auto_offload=False), root=ROOT, writer_id=writer_id,
            clock=self.clock,
        )

    async def zombie(self, entries: list[bytes]) -> ManagedLedger:
        """The first owner, with ledger 0 sealed (``entries``) and ledger 1 open."""
        ml = await self.open(self.zombie_offloader, "zombie")
        for i in range(0, len(entries), 8):
            await ml.add_entries(entries[i : i + 8])
        await ml.rollover()
        self.entries = entries
        return ml

    async def newest(self) -> ManagedLedgerMetadata:
        """The metadata as a fresh reader loads it now."""
        return await ManagedLedgerMetadata.open(self.store, ManagedLedgerPath(ROOT, NAME))

    async def sweep(self, *, later: bool = True) -> list[str]:
        now = datetime.now(UTC) + (LATER if later else timedelta())
        found = await sweep_offloads(self.newer_offloader, self.store, root=ROOT,
                                     safety_age=SAFETY_AGE, now=now)
        return [g.kind for g in found.found]


def owners(tmp_path: Path, *, store: ObjectStore | None = None,
           zombie_read_block: int = MiB) -> Owners:
    bucket = store or MemoryObjectStore()
    return Owners(bucket, LocalLedgerStore(tmp_path / "ledgers", fsync=False),
                  GatedOffloader(bucket, read_block_size=zombie_read_block),
                  GatedOffloader(bucket))


def small_entries() -> list[bytes]:
    return [bytes([i]) * (100 + i) for i in range(20)]


def big_entries() -> list[bytes]:
    """About 7 MiB: two parts of a multipart upload; one entry a block at a
    read block size of 1 MiB, three at 2 MiB (so the data bytes differ)."""
    return [bytes([i]) * (512 * 1024 + i) for i in range(14)]


class DyingStore(FaultyStore):
    """Fails every call of the operations in ``dead_ops``."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.dead_ops: set[str] = set()

    def _check(self, op: str, key: str) -> None:
        if op in self.dead_ops:
            raise InjectedFault(f"{op} of {key!r}: the process died", op=op, key=key)


@pytest.fixture
def same_uuid(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every attempt, the zombie's and the newer owner's, gets the uuid X."""
    # Only the attempts' uuids: writer and session ids stay random.
    monkeypatch.setattr(attempt_mod, "uuid_mod", SimpleNamespace(uuid4=lambda: X))
    yield


async def check_outcome(o: Owners, newer: ManagedLedger, winner: uuid_mod.UUID,
                        swept: list[str] | None = None) -> None:
    """Exactly one offload recorded, the newer owner's; it reads back; the
    newer owner is not fenced; after a sweep (which finds ``swept``) the
    bucket holds the winner's objects only."""
    swept = swept or []
    meta = await o.newest()
    assert meta.head.writerId == "newer"
    recorded = [i async for i in meta.ledgers() if offload_uuid(i) is not None]
    assert [(i.ledgerId, offload_uuid(i), i.offloadContext.complete) for i in recorded] == [
        (0, winner, True)]
    handle = await newer.read_handle(0)
    assert isinstance(handle, OffloadedReadHandle) and handle.location.uuid == winner
    got = await handle.read(0, len(o.entries) - 1)
    assert [e.payload for e in got] == o.entries
    fresh = await SegmentLedgerOffloader(o.store).read_offloaded(0, winner)
    assert [e.payload for e in await fresh.read(0, len(o.entries) - 1)] == o.entries
    # The newer owner goes on writing and offloading.
    assert not newer.meta.fenced
    position = await newer.add_entry(b"after")
    await newer.rollover()
    await newer.offload_prefix(Position(position.ledger_id + 1, 0))
    assert (await newer.read_entry(position)).payload == b"after"
    # After the sweep: the winner's objects only (its data object and index),
    # plus the newer owner's later offload; no upload.
    assert await o.sweep() == swept
    objects = await offload_objects(o.store)
    winner_name = data_object_name(0, winner)
    location = o.newer_offloader.locate(0, winner)
    assert sorted(objects[winner_name]) == sorted([location.data_key, location.index_key])
    assert set(objects) == {winner_name, data_object_name(position.ledger_id,
                                                            o.newer_offloader.uuids[-1])}
    assert await o.store.list_multipart_uploads("") == []


# --- each with its own uuid, as Pulsar does --------------------------------------------------


@pytest.mark.parametrize("point", POINTS)
async def test_zombie_starts_newer_opens_zombie_finishes(tmp_path: Path, point: str) -> None:
    """The zombie records its uuid and stops mid-attempt; the newer owner
    opens; the zombie finishes its objects and is fenced at the head write
    that would record them. The newer owner's offload deletes the zombie's
    attempt through the uuid its head records, and offloads anew."""
    o = owners(tmp_path)
    zombie = await o.zombie(small_entries())
    o.zombie_offloader.hold(point)
    task = asyncio.create_task(zombie.offload_prefix(Position(1, 0)))
    await o.zombie_offloader.reached[point].wait()
    newer = await o.open(o.newer_offloader, "newer")
    o.zombie_offloader.release(point)
    with pytest.raises(ManagedLedgerFenced):
        await task
    (zombie_uuid,) = o.zombie_offloader.uuids
    info = await newer.meta.ledger(0)
    assert info is not None and offload_uuid(info) == zombie_uuid
    assert not info.offloadContext.complete
    assert await newer.offload_prefix(Position(1, 0)) == Position(2, 0)
    (newer_uuid,) = o.newer_offloader.uuids
    assert newer_uuid != zombie_uuid
    assert list(await offload_objects(o.store)) == [data_object_name(0, newer_uuid)]
    await check_outcome(o, newer, newer_uuid)


@pytest.mark.parametrize("point", POINTS)
async def test_newer_offloads_while_the_zombie_is_mid_attempt(tmp_path: Path,
                                                              point: str) -> None:
    """The newer owner offloads the ledger while the zombie's attempt is
    stopped; the zombie then writes the rest of its attempt, which no
    metadata references any more, and its head write lands on a version the
    newer owner already passed. It is fenced all the same, and its objects
    are the sweep's."""
    o = owners(tmp_path)
    zombie = await o.zombie(small_entries())
    o.zombie_offloader.hold(point)
    task = asyncio.create_task(zombie.offload_prefix(Position(1, 0)))
    await o.zombie_offloader.reached[point].wait()
    newer = await o.open(o.newer_offloader, "newer")
    assert await newer.offload_prefix(Position(1, 0)) == Position(2, 0)
    o.zombie_offloader.release(point)
    with pytest.raises(ManagedLedgerFenced):
        await task
    (zombie_uuid,), (newer_uuid,) = o.zombie_offloader.uuids, o.newer_offloader.uuids
    # Its head did land, on a version below the newest (kept heads: the newest two).
    path = ManagedLedgerPath(ROOT, NAME)
    writers: dict[int, str] = {}
    for info in await o.store.list_all(path.heads_prefix):
        version = path.head_version(info.key)
        assert version is not None
        writers[version] = decode_head(await o.store.get(info.key), info.key, version).writerId
    newest = max(writers)
    assert [w for v, w in writers.items() if v < newest - 1] == ["zombie"]
    with pytest.raises(ManagedLedgerFenced):
        await zombie.add_entry(b"zombie")
    left = await offload_objects(o.store)
    assert set(left) == {data_object_name(0, zombie_uuid), data_object_name(0, newer_uuid)}
    # Young: the sweep leaves it for now.
    assert await o.sweep(later=False) == []
    assert set(await offload_objects(o.store)) == set(left)
    await check_outcome(o, newer, newer_uuid, [UNREFERENCED])


async def test_newer_offloads_first_then_the_zombie_tries(tmp_path: Path) -> None:
    """The zombie's offload after the newer owner's is fenced at its first
    head write, before it writes any object."""
    o = owners(tmp_path)
    zombie = await o.zombie(small_entries())
    newer = await o.open(o.newer_offloader, "newer")
    await newer.offload_prefix(Position(1, 0))
    (newer_uuid,) = o.newer_offloader.uuids
    with pytest.raises(ManagedLedgerFenced):
        await zombie.offload_prefix(Position(1, 0))
    assert o.zombie_offloader.uuids == []
    assert list(await offload_objects(o.store)) == [data_object_name(0, newer_uuid)]
    await check_outcome(o, newer, newer_uuid)


async def test_a_zombie_that_dies_mid_upload_leaves_nothing_for_good(tmp_path: Path) -> None:
    """The zombie's store fails its completion and every cleanup call (as a
    process that died would leave it): a multipart upload of an attempt no
    metadata references. The sweep aborts it once older than the safety age."""
    memory = MemoryObjectStore()
    dying = DyingStore(memory)
    o = owners(tmp_path, store=memory)
    o.zombie_offloader = GatedOffloader(dying)
    zombie = await o.zombie(big_entries())
    o.zombie_offloader.hold("copy")
    task = asyncio.create_task(zombie.offload_prefix(Position(1, 0)))
    await o.zombie_offloader.reached["copy"].wait()
    newer = await o.open(o.newer_offloader, "newer")
    await newer.offload_prefix(Position(1, 0))
    dying.dead_ops = {"complete_multipart", "abort_multipart", "delete"}
    o.zombie_offloader.release("copy")
    with pytest.raises(ManagedLedgerFenced):
        await task
    (zombie_uuid,) = o.zombie_offloader.uuids
    zombie_location = o.zombie_offloader.locate(0, zombie_uuid)
    assert await memory.list_multipart_uploads(zombie_location.data_key)
    assert not await memory.list_all(zombie_location.data_key)
    await check_outcome(o, newer, o.newer_offloader.uuids[0], [UPLOAD])


# --- both with the same uuid ---------------------------------------------------------------


@pytest.mark.usefixtures("same_uuid")
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("same_bytes", [True, False], ids=["same-bytes", "different-bytes"])
async def test_same_uuid_newer_wins_the_names(tmp_path: Path, point: str,
                                              same_bytes: bool) -> None:
    """Both attempts are named X. The zombie stops mid-attempt; the newer
    owner deletes what X holds (the attempt its head records), records X
    and offloads. The zombie then writes on: its If-None-Match create of the
    data object finds another writer's token (fenced, same bytes or not), or
    its index is the one there (same bytes: idempotent) or not (fenced).
    Either way it is fenced at the metadata and deletes nothing of X."""
    o = owners(tmp_path, zombie_read_block=MiB if same_bytes else 2 * MiB)
    zombie = await o.zombie(big_entries())
    o.zombie_offloader.hold(point)
    task = asyncio.create_task(zombie.offload_prefix(Position(1, 0)))
    await o.zombie_offloader.reached[point].wait()
    newer = await o.open(o.newer_offloader, "newer")
    assert await newer.offload_prefix(Position(1, 0)) == Position(2, 0)
    location = o.newer_offloader.locate(0, X)
    index = await o.store.get(location.index_key)
    o.zombie_offloader.release(point)
    with pytest.raises(ManagedLedgerFenced):
        await task
    assert o.zombie_offloader.uuids == o.newer_offloader.uuids[:1] == [X]
    assert await o.store.get(location.index_key) == index
    assert OffloadIndex.decode(index).entries[0].offset == 0
    # The zombie aborted its upload when fenced: nothing of it is left.
    await check_outcome(o, newer, X, [])


@pytest.mark.usefixtures("same_uuid")
@pytest.mark.parametrize("same_bytes", [True, False], ids=["same-bytes", "different-bytes"])
async def test_same_uuid_zombie_finishes_first(tmp_path: Path, same_bytes: bool) -> None:
    """The zombie writes all of X before the newer owner offloads, and is
    fenced at the head write; the newer owner deletes X and writes it anew."""
    o = owners(tmp_path, zombie_read_block=MiB if same_bytes else 2 * MiB)
    zombie = await o.zombie(big_entries())
    o.zombie_offloader.hold("index")
    task = asyncio.create_task(zombie.offload_prefix(Position(1, 0)))
    await o.zombie_offloader.reached["index"].wait()
    newer = await o.open(o.newer_offloader, "newer")
    o.zombie_offloader.release("index")
    with pytest.raises(ManagedLedgerFenced):
        await task
    assert await newer.offload_prefix(Position(1, 0)) == Position(2, 0)
    await check_outcome(o, newer, X)


# --- the sweep ----------------------------------------------------------------------------------


async def test_the_sweep_never_touches_a_referenced_attempt_in_flight(tmp_path: Path) -> None:
    """An attempt its owner is still writing is referenced (its uuid is
    recorded before its first object): however old, the sweep leaves it."""
    o = owners(tmp_path)
    zombie = await o.zombie(big_entries())
    newer = await o.open(o.newer_offloader, "newer")
    await zombie.close()
    o.newer_offloader.hold("index")
    task = asyncio.create_task(newer.offload_prefix(Position(1, 0)))
    await o.newer_offloader.reached["index"].wait()
    before = sorted(info.key for info in await o.store.list_all("offload/"))
    assert before
    assert await o.sweep() == []
    assert sorted(info.key for info in await o.store.list_all("offload/")) == before
    o.newer_offloader.release("index")
    assert await task == Position(2, 0)
    await check_outcome(o, newer, o.newer_offloader.uuids[0])


async def test_the_sweep_deletes_nothing_when_a_newest_head_is_damaged(
        tmp_path: Path) -> None:
    """The sweep reads each managed ledger's newest head; one it cannot read
    might reference any attempt, so nothing is deleted."""
    o = owners(tmp_path)
    zombie = await o.zombie(small_entries())
    await zombie.offload_prefix(Position(1, 0))
    orphan = uuid_mod.uuid4()
    handle = await o.ledgers.open_ledger(0)
    await o.newer_offloader.offload(handle, orphan, {})
    await handle.close()
    meta = await o.newest()
    key = meta.path.head_key(meta.version)
    data = bytearray(await o.store.get(key))
    data[-1] ^= 0xFF
    await o.store.delete(key)
    await o.store.put(key, bytes(data))
    with pytest.raises(CorruptManagedLedger, match="damaged: refusing to sweep"):
        await o.sweep()
    assert data_object_name(0, orphan) in await offload_objects(o.store)


# --- an owner never deletes an offload that may be recorded ---------------------------------------


async def test_a_recorded_offload_whose_answer_was_lost_is_kept(tmp_path: Path) -> None:
    """The head that records the offload complete lands, its answer is lost,
    and the listing that would tell fails too: the outcome is unknown, so
    the attempt's objects stay (they are what the metadata now records)."""
    faulty = FaultyStore(MemoryObjectStore())
    o = owners(tmp_path, store=faulty)
    ml = await o.zombie(small_entries())
    faulty.fail("put", 2, match="/head-", after=True)  # 1: the uuid, 2: complete
    faulty.fail("list", 2, match="/head-")  # 1: confirms the uuid, 2: settles
    with pytest.raises(InjectedFault):
        await ml.offload_prefix(Position(1, 0))
    assert len(faulty.fired) == 2
    faulty.disarm()
    (uuid,) = o.zombie_offloader.uuids
    info = await (await o.newest()).ledger(0)
    assert info is not None and info.offloadContext.complete and offload_uuid(info) == uuid
    copy = await SegmentLedgerOffloader(o.store).read_offloaded(0, uuid)
    assert [e.payload for e in await copy.read(0, len(o.entries) - 1)] == o.entries
    assert await ml.offload_prefix(Position(1, 0)) == Position(1, 0)  # settles: adopted
    assert list(await offload_objects(o.store)) == [data_object_name(0, uuid)]


async def test_the_sweep_reads_every_managed_ledger_and_its_pages(tmp_path: Path) -> None:
    """References in another managed ledger of the root, and in pages, count."""
    store = MemoryObjectStore()
    ledgers = LocalLedgerStore(tmp_path / "ledgers", fsync=False)
    offloader = GatedOffloader(store)
    clock = Clock()
    config = ManagedLedgerConfig(auto_offload=False, page_size=1)
    for name in ("a/b/c", "d/e/f"):
        ml = await ManagedLedger.open(name, metadata_store=store, ledgers=ledgers,
                                      offloader=offloader, config=config, root=ROOT,
                                      clock=clock)
        await ml.add_entries([b"x", b"y"])
        await ml.rollover()
        await ml.offload_prefix(Position(ml.current_ledger_id, 0))
        clock.advance(config.deletion_lag_seconds)
        assert len(await ml.delete_offloaded_local_copies()) == 1
        assert ml.meta.head.pagedLedgers == 1  # its record is in a page now
        await ml.close()
    recorded = [data_object_name(ledger_id, uuid) for ledger_id, uuid
                in zip((0, 2), offloader.uuids, strict=True)]
    orphan = uuid_mod.uuid4()
    other = await make_ledger(LocalLedgerStore(tmp_path / "other", fsync=False), [b"z"])
    await offloader.offload(other, orphan, {})  # ledger 0 again, as a dead writer left it
    now = datetime.now(UTC) + LATER
    found = await sweep_offloads(offloader, store, root=ROOT, safety_age=SAFETY_AGE, now=now)
    assert [(g.kind, g.key) for g in found.found] == [
        (UNREFERENCED, offloader.locate(0, orphan).data_key)]
    assert sorted(await offload_objects(store)) == sorted(recorded)
