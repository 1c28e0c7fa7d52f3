"""Failures injected at every step of an offload; the next attempt leaves no
orphan object and the ledger reads back.

Each case offloads a 12 MiB ledger in parts of at least 5 MiB (a multipart
upload of three parts, then the index) through a managed ledger whose object
store raises on the chosen call (``after``: once the call landed, its answer
lost). After the failure the
faults are disarmed and ``offload_prefix`` runs again. Then every object in
the bucket must be managed-ledger metadata or belong to the attempt the
metadata records as complete, no multipart upload may be left, and every
entry must read back from the offloaded copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ledger.helpers import (
    Clock,
    FaultyStore,
    InjectedFault,
    MiB,
    offload_objects,
    payloads,
    random_sizes,
)
from tieredstore.ledger import (
    LocalLedgerStore,
    ManagedLedger,
    ManagedLedgerConfig,
    OffloadedReadHandle,
    OffloadOptions,
    Position,
    SegmentLedgerOffloader,
)
from tieredstore.ledger.managed.meta.format import offload_uuid
from tieredstore.objectstore import MemoryObjectStore, ObjectStore


async def start(tmp_path: Path, store: ObjectStore) -> tuple[ManagedLedger, list[bytes]]:
    ledgers = LocalLedgerStore(tmp_path / "ledgers", fsync=False)
    off = SegmentLedgerOffloader(store, options=OffloadOptions(block_size=5 * MiB))
    ml = await ManagedLedger.open(
        "tenant/ns/persistent/topic", metadata_store=store, ledgers=ledgers, offloader=off,
        config=ManagedLedgerConfig(auto_offload=False), clock=Clock(),
    )
    entries = payloads(random_sizes(12 * MiB, 11, big=2 * MiB), 11)
    for i in range(0, len(entries), 32):
        await ml.add_entries(entries[i : i + 32])
    await ml.rollover()
    assert ml.current_ledger_id == 1
    return ml, entries


async def check_no_orphans(store: ObjectStore, ml: ManagedLedger) -> None:
    """Every object is metadata of the managed ledger or a complete, recorded offload."""
    recorded = set()
    for info in await ml.ledger_infos():
        uuid = offload_uuid(info)
        if uuid is not None and info.offloadContext.complete:
            recorded.add(f"{uuid}-ledger-{info.ledgerId}")
    objects = await offload_objects(store)
    assert set(objects) <= recorded, f"orphans: {set(objects) - recorded}"
    for name in recorded:
        assert len(objects.get(name, [])) == 2, f"{name}: {objects.get(name)}"
    meta_base = ml.meta.path.base
    others = [o.key for o in await store.list_all("") if not o.key.startswith("offload/")]
    assert all(k.startswith(meta_base) for k in others), others
    assert await store.list_multipart_uploads("") == []


async def check_reads(ml: ManagedLedger, entries: list[bytes]) -> None:
    handle = await ml.read_handle(0)
    assert isinstance(handle, OffloadedReadHandle)
    got = await ml.read_entries(0, 0, len(entries) - 1)
    assert [e.payload for e in got] == entries


STEPS = [
    ("create_multipart", 1, None, False),
    ("upload_part", 1, None, False),
    ("upload_part", 2, None, False),
    ("upload_part", 3, None, False),
    ("complete_multipart", 1, None, False),
    ("complete_multipart", 1, None, True),
    ("put", 1, "-index", False),
    ("put", 1, "-index", True),
    ("put", 1, "/head-", False),  # recording the attempt's uuid
    ("put", 2, "/head-", False),  # recording the offload complete
]


@pytest.mark.parametrize(("op", "nth", "match", "after"), STEPS,
                         ids=[f"{op}#{nth}{'-' + m.strip('/-') if m else ''}{'-lost' if a else ''}"
                              for op, nth, m, a in STEPS])
async def test_failure_then_next_attempt(tmp_path: Path, op: str, nth: int, match: str | None,
                                         after: bool) -> None:
    store = FaultyStore(MemoryObjectStore())
    ml, entries = await start(tmp_path, store)
    store.fail(op, nth, match=match, after=after)
    with pytest.raises(Exception) as err:
        await ml.offload_prefix(Position(1, 0))
    assert store.fired, f"the fault {op}#{nth} was never reached"
    chain: BaseException | None = err.value
    while chain is not None and not isinstance(chain, InjectedFault):
        chain = chain.__cause__ or chain.__context__
    assert chain is not None, f"{err.value!r} was not caused by the injected fault"
    store.disarm()
    if ml.meta.fenced or ml.meta.version == 0:
        pytest.fail("the managed ledger should survive a failed offload")
    assert await ml.offload_prefix(Position(1, 0)) == Position(1, 0)
    await check_no_orphans(store, ml)
    await check_reads(ml, entries)
    await ml.close()


async def test_failed_cleanup_is_finished_through_the_uuid(tmp_path: Path) -> None:
    """The attempt fails and so does its immediate cleanup: its objects stay,
    under the uuid recorded before it started; the next attempt deletes them
    through that uuid before it begins."""
    store = FaultyStore(MemoryObjectStore())
    ml, entries = await start(tmp_path, store)
    store.fail("put", 1, match="-index")  # the data object stands
    store.fail("delete", 1, match="-index")  # the cleanup's first delete
    with pytest.raises(InjectedFault):
        await ml.offload_prefix(Position(1, 0))
    info = await ml.meta.ledger(0)
    assert info is not None and not info.offloadContext.complete
    failed = f"{offload_uuid(info)}-ledger-0"
    assert failed in await offload_objects(store)  # left behind, but recorded
    store.disarm()
    await ml.offload_prefix(Position(1, 0))
    assert failed not in await offload_objects(store)
    await check_no_orphans(store, ml)
    await check_reads(ml, entries)


@pytest.mark.parametrize(("op", "after"), [("put", True), ("list", False)],
                         ids=["answer-lost", "listing-after-it-fails"])
async def test_completing_head_write_that_landed(tmp_path: Path, op: str, after: bool) -> None:
    """The head that records the offload complete lands, but its answer is
    lost or the listing that follows it fails: the managed ledger finds out
    that it landed and keeps the offload."""
    store = FaultyStore(MemoryObjectStore())
    ml, entries = await start(tmp_path, store)
    store.fail(op, 2, match="/head-", after=after)
    assert await ml.offload_prefix(Position(1, 0)) == Position(1, 0)
    assert store.fired
    await check_no_orphans(store, ml)
    await check_reads(ml, entries)
