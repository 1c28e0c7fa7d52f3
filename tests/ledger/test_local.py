"""The local ledger store: record and metadata bytes, digests, fencing, recovery.

Golden bytes come from ``struct.pack`` and the ``crc32c`` package applied as
the format description says, never from the encoder under test.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import crc32c as crc32c_pkg
import pytest

from tests.ledger.test_format import METADATA
from tieredstore.ledger import (
    CorruptLedger,
    DigestMismatch,
    DigestType,
    EntryOutOfRange,
    LedgerClosed,
    LedgerEntry,
    LedgerExists,
    LedgerFenced,
    LedgerMetadata,
    LedgerNotFound,
    LedgerState,
    LocalLedgerStore,
)
from tieredstore.ledger.entrylog import encode_record


def crc(data: bytes) -> int:
    return int(crc32c_pkg.crc32c(data))


def record_bytes(ledger_id: int, entry_id: int, lac: int, payload: bytes) -> bytes:
    """ledger_id, entry_id, lac, length (int64 each), then the CRC32C of those
    32 bytes and the payload (uint32), then the payload."""
    head = struct.pack(">qqqq", ledger_id, entry_id, lac, len(payload))
    return head + struct.pack(">I", crc(head + payload)) + payload


def append_bytes(path: Path, data: bytes) -> None:
    path.write_bytes(path.read_bytes() + data)


@pytest.fixture
def ledgers(tmp_path: Path) -> LocalLedgerStore:
    return LocalLedgerStore(tmp_path / "ledgers", fsync=False)


def test_crc32c_is_castagnoli() -> None:
    assert crc(b"123456789") == 0xE3069283  # the CRC32C check value


def test_record_golden() -> None:
    expected = bytes.fromhex(
        "0000000000000007"  # ledger id 7
        "0000000000000002"  # entry id 2
        "0000000000000001"  # last add confirmed 1
        "0000000000000003"  # length 3
    )
    expected += struct.pack(">I", crc(expected + b"abc")) + b"abc"
    assert b"".join(bytes(b) for b in encode_record(7, 2, 1, b"abc")) == expected
    assert record_bytes(7, 2, 1, b"abc") == expected


def test_ledger_metadata_golden() -> None:
    meta = LedgerMetadata(
        ensemble_size=3, write_quorum_size=2, ack_quorum_size=2,
        digest_type=DigestType.CRC32C, state=LedgerState.CLOSED, last_entry_id=1,
        length=15, ctime_ms=1, ensembles=((0, ("b1:3181",)),),
    )
    assert meta.to_bytes() == METADATA  # BookKeeper's LedgerMetadataFormat, hand-encoded
    assert LedgerMetadata.from_bytes(METADATA) == meta
    assert meta.closed


async def test_files_golden(ledgers: LocalLedgerStore) -> None:
    writer = await ledgers.create_ledger()
    assert writer.ledger_id == 0
    await writer.append_many([b"hello", b""])  # one batch: both sent knowing LAC -1
    await writer.append(b"!")  # sent once entries 0 and 1 were acknowledged
    await writer.close()
    log = ledgers.log_path(0).read_bytes()
    assert log == record_bytes(0, 0, -1, b"hello") + record_bytes(0, 1, -1, b"") + \
        record_bytes(0, 2, 1, b"!")
    meta = ledgers.meta_path(0).read_bytes()
    payload = meta[8:]
    assert meta[:8] == b"TLM1" + struct.pack(">I", crc(payload))
    parsed = LedgerMetadata.from_bytes(payload)
    assert (parsed.state, parsed.last_entry_id, parsed.length) == (LedgerState.CLOSED, 2, 6)
    assert parsed.digest_type is DigestType.CRC32C


async def test_append_and_read(ledgers: LocalLedgerStore) -> None:
    writer = await ledgers.create_ledger(ensemble_size=3, write_quorum_size=2,
                                         ack_quorum_size=2)
    data = [b"a", b"", b"ccc" * 1000, bytes(range(256))]
    assert await writer.append(data[0]) == 0
    assert await writer.append_many(data[1:]) == [1, 2, 3]
    assert (writer.last_add_confirmed, writer.length) == (3, sum(map(len, data)))
    assert await writer.read(0, 3) == [LedgerEntry(i, p) for i, p in enumerate(data)]
    assert await writer.read(2, 2) == [LedgerEntry(2, data[2])]
    await writer.close()
    handle = await ledgers.open_ledger(writer.ledger_id)
    assert handle.closed and handle.last_add_confirmed == 3
    assert (handle.metadata.ensemble_size, handle.metadata.write_quorum_size,
            handle.metadata.ack_quorum_size) == (3, 2, 2)
    assert await handle.read(1, 3) == [LedgerEntry(i, data[i]) for i in (1, 2, 3)]
    with pytest.raises(EntryOutOfRange, match=r"holds entries 0\.\.3"):
        await handle.read(3, 4)
    with pytest.raises(EntryOutOfRange):
        await handle.read(2, 1)
    await handle.close()
    with pytest.raises(LedgerClosed):
        await handle.read(0, 0)
    with pytest.raises(LedgerClosed):
        await writer.append(b"late")


async def test_ids_exists_delete(ledgers: LocalLedgerStore) -> None:
    a = await ledgers.create_ledger()
    b = await ledgers.create_ledger()
    assert (a.ledger_id, b.ledger_id) == (0, 1)
    with pytest.raises(LedgerExists):
        await ledgers.create_ledger(ledger_id=1)
    c = await ledgers.create_ledger(ledger_id=10)
    assert (await ledgers.create_ledger()).ledger_id == 11
    assert await ledgers.ledger_ids() == [0, 1, 10, 11]
    await c.close()
    assert await ledgers.delete_ledger(10)
    assert not await ledgers.delete_ledger(10)
    assert not await ledgers.exists(10)
    with pytest.raises(LedgerNotFound):
        await ledgers.open_ledger(10)


async def test_an_id_is_never_given_twice(ledgers: LocalLedgerStore) -> None:
    """Ledger ids are unique for the life of the directory, as BookKeeper's: a
    deleted ledger's id is not given again (managed ledgers share the directory,
    and one deleting "its" ledger 1 must not delete another's new ledger 1),
    also by a store opened on the directory later."""
    made = [await ledgers.create_ledger() for _ in range(3)]
    for writer in made:
        await writer.close()
    assert await ledgers.delete_ledger(2) and await ledgers.delete_ledger(1)
    assert (await ledgers.create_ledger()).ledger_id == 3
    assert await ledgers.delete_ledger(3)
    again = LocalLedgerStore(ledgers.root, fsync=False)
    assert (await again.create_ledger()).ledger_id == 4
    assert await again.ledger_ids() == [0, 4]


async def test_digest_is_checked_on_read(ledgers: LocalLedgerStore) -> None:
    writer = await ledgers.create_ledger()
    await writer.append_many([b"first", b"second", b"third"])
    await writer.close()
    path = ledgers.log_path(writer.ledger_id)
    raw = bytearray(path.read_bytes())
    second = len(record_bytes(0, 0, -1, b"first"))
    raw[second + 36 + 2] ^= 0x01  # one bit of entry 1's payload
    path.write_bytes(bytes(raw))
    handle = await ledgers.open_ledger(writer.ledger_id)
    assert await handle.read(0, 0) == [LedgerEntry(0, b"first")]
    assert await handle.read(2, 2) == [LedgerEntry(2, b"third")]
    with pytest.raises(DigestMismatch, match="entry 1: CRC32C digest"):
        await handle.read(0, 2)


async def test_recovery_fences_the_writer(tmp_path: Path) -> None:
    """A new owner (another store instance, its own file descriptors) opens the
    ledger with recovery: the old writer's next append is refused, and the
    recovered ledger holds exactly the entries acknowledged before."""
    old_owner = LocalLedgerStore(tmp_path, fsync=False)
    new_owner = LocalLedgerStore(tmp_path, fsync=False)
    writer = await old_owner.create_ledger()
    acked: list[int] = []

    async def keep_writing() -> None:
        i = 0
        while True:
            acked.append(await writer.append(b"entry %d" % i))
            i += 1

    task = asyncio.create_task(keep_writing())
    for _ in range(10_000):
        if len(acked) >= 20:
            break
        await asyncio.sleep(0.001)
    recovered = await new_owner.open_ledger(writer.ledger_id, recovery=True)
    with pytest.raises(LedgerFenced, match="new owner"):
        await task
    assert recovered.closed
    assert recovered.last_add_confirmed == len(acked) - 1 == acked[-1]
    entries = await recovered.read(0, recovered.last_add_confirmed)
    assert [e.payload for e in entries] == [b"entry %d" % i for i in range(len(acked))]
    with pytest.raises(LedgerFenced):
        await writer.append(b"after the fence")
    # Closing the fenced writer at the same last entry is no conflict.
    await writer.close()


async def test_reader_of_an_open_ledger(ledgers: LocalLedgerStore) -> None:
    writer = await ledgers.create_ledger()
    await writer.append_many([b"a", b"b"])
    reader = await ledgers.open_ledger(writer.ledger_id)
    assert not reader.closed and reader.last_add_confirmed == 1
    await writer.append(b"c")  # a plain reader does not fence
    assert reader.last_add_confirmed == 1
    with pytest.raises(EntryOutOfRange):
        await reader.read(2, 2)
    again = await ledgers.open_ledger(writer.ledger_id)
    assert [e.payload for e in await again.read(0, 2)] == [b"a", b"b", b"c"]


async def test_recovery_cuts_a_torn_tail(ledgers: LocalLedgerStore) -> None:
    writer = await ledgers.create_ledger()
    await writer.append_many([b"one", b"two", b"three"])
    path = ledgers.log_path(writer.ledger_id)
    good = path.stat().st_size
    append_bytes(path, record_bytes(0, 3, 2, b"four" * 100)[:200])  # a crash mid-entry
    handle = await ledgers.open_ledger(writer.ledger_id, recovery=True)
    assert (handle.last_add_confirmed, handle.length) == (2, 11)
    assert path.stat().st_size == good
    assert [e.payload for e in await handle.read(0, 2)] == [b"one", b"two", b"three"]


@pytest.mark.parametrize("tail", ["zeros", "bad_digest_last"])
async def test_recovery_treats_what_a_crash_leaves_as_torn(
    ledgers: LocalLedgerStore, tail: str
) -> None:
    writer = await ledgers.create_ledger()
    await writer.append_many([b"one", b"two"])
    path = ledgers.log_path(writer.ledger_id)
    if tail == "zeros":
        append_bytes(path, bytes(5000))
    else:
        rec = bytearray(record_bytes(0, 2, 1, b"three"))
        rec[-1] ^= 0xFF
        append_bytes(path, bytes(rec))
    handle = await ledgers.open_ledger(writer.ledger_id, recovery=True)
    assert handle.last_add_confirmed == 1


async def test_recovery_refuses_damage_before_the_tail(ledgers: LocalLedgerStore) -> None:
    writer = await ledgers.create_ledger()
    await writer.append_many([b"one", b"two", b"three"])
    path = ledgers.log_path(writer.ledger_id)
    raw = bytearray(path.read_bytes())
    raw[36] ^= 0x01  # entry 0's payload
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptLedger, match="entry 0"):
        await ledgers.open_ledger(writer.ledger_id, recovery=True)


async def test_closed_ledger_with_missing_entries_is_corrupt(ledgers: LocalLedgerStore) -> None:
    writer = await ledgers.create_ledger()
    await writer.append_many([b"one", b"two"])
    await writer.close()
    path = ledgers.log_path(writer.ledger_id)
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(CorruptLedger, match="closed at entry 1"):
        await ledgers.open_ledger(writer.ledger_id)
