"""LedgerOffloader: round trips byte for byte, the PIP-17 objects it writes at
PIP-17's names, what it refuses, fencing, cleanup."""

from __future__ import annotations

import dataclasses
import random
import struct
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.ledger.helpers import (
    MiB,
    make_ledger,
    offload_objects,
    parse_pip17,
    payloads,
    random_sizes,
)
from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import NoSuchUpload, PreconditionFailed
from tieredstore.ledger import (
    CorruptLedger,
    EntryOutOfRange,
    EntryTooLarge,
    LedgerEntry,
    LedgerSelection,
    LocalLedgerStore,
    LocalReadHandle,
    OffloadExists,
    OffloadFenced,
    OffloadMetadataTooLarge,
    OffloadNamespace,
    OffloadNotFound,
    OffloadOptions,
    OffloadRefused,
    SegmentLedgerOffloader,
    parse_offload_key,
    plan_ledger_slices,
    read_ledger_slice,
)
from tieredstore.ledger.format import data_object_name, index_object_name
from tieredstore.ledger.handle import ReadHandle
from tieredstore.objectstore import (
    ByteRange,
    MemoryObjectStore,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
)
from tieredstore.testing import ForwardingObjectStore

UUID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


@pytest.fixture
def ledgers(tmp_path: Path) -> LocalLedgerStore:
    return LocalLedgerStore(tmp_path / "ledgers", fsync=False)


@pytest.fixture
async def memory() -> AsyncIterator[MemoryObjectStore]:
    store = MemoryObjectStore()
    yield store
    await store.close()


def offloader(store: ObjectStore, *, block_size: int = 5 * MiB) -> SegmentLedgerOffloader:
    return SegmentLedgerOffloader(store, options=OffloadOptions(block_size=block_size))


async def check_reads_identically(source: LocalReadHandle, copy: ReadHandle,
                                  entries: list[bytes], seed: int) -> None:
    """Entry by entry, then random ranges, byte for byte; and the same answers
    to every question a ReadHandle answers."""
    assert copy.ledger_id == source.ledger_id
    assert copy.metadata == source.metadata
    assert (copy.last_add_confirmed, copy.length, copy.closed) == (
        source.last_add_confirmed, source.length, True)
    for i, payload in enumerate(entries):
        got = await copy.read(i, i)
        assert got == [LedgerEntry(i, payload)], f"entry {i} differs"
    rng = random.Random(seed)
    last = len(entries) - 1
    for _ in range(12):
        a = rng.randint(0, last)
        b = rng.randint(a, min(last, a + rng.choice([0, 3, 40, 400])))
        assert await copy.read(a, b) == await source.read(a, b), f"range {a}..{b} differs"
    assert await copy.read(0, last) == [LedgerEntry(i, p) for i, p in enumerate(entries)]
    with pytest.raises(EntryOutOfRange):
        await copy.read(last, last + 1)


async def check_objects_are_pip17(store: ObjectStore, source: LocalReadHandle,
                                  entries: list[bytes], *, prefix: str = "offload/",
                                  read_block: int = MiB) -> None:
    """At PIP-17's names ``{uuid}-ledger-{id}`` and ``...-index`` (under the
    prefix), the objects decode with PIP-17's layout (an independent parser)
    to exactly the ledger's entries and metadata; blocks are about the read
    size (one entry may make a larger one), numbered from part 1."""
    name = f"{UUID}-ledger-{source.ledger_id}"
    assert sorted(o.key for o in await store.list_all(prefix)) == [
        prefix + name, prefix + name + "-index"]
    data = await store.get(prefix + name)
    found, mappings, meta = parse_pip17(data, await store.get(prefix + name + "-index"))
    assert found == list(enumerate(entries))
    assert meta == source.metadata.to_bytes()
    assert [m[1] for m in mappings] == list(range(1, len(mappings) + 1))
    ends = [m[2] for m in mappings[1:]] + [len(data)]
    for (first, _, offset), end in zip(mappings, ends, strict=True):
        assert end - offset <= read_block or end - offset == 140 + len(entries[first])


@pytest.mark.parametrize(
    ("block_size", "total", "seed"),
    [(5 * MiB, 12 * MiB, 1), (5 * MiB, 30 * MiB, 2), (64 * MiB, 72 * MiB, 3)],
    ids=["5MiB-blocks-12MiB", "5MiB-blocks-30MiB", "64MiB-blocks-72MiB"],
)
async def test_round_trip(ledgers: LocalLedgerStore, memory: MemoryObjectStore,
                          block_size: int, total: int, seed: int) -> None:
    entries = payloads(random_sizes(total, seed), seed)
    assert 0 in map(len, entries) and max(map(len, entries)) > 2 * MiB
    source = await make_ledger(ledgers, entries)
    off = offloader(memory, block_size=block_size)
    await off.offload(source, UUID, {"ManagedLedgerName": "tenant/ns/persistent/t"})
    await check_objects_are_pip17(memory, source, entries)
    assert memory.metrics.requests["upload_part"] >= total // block_size
    copy = await off.read_offloaded(source.ledger_id, UUID)
    await check_reads_identically(source, copy, entries, seed)
    await copy.close()


@pytest.mark.s3
@pytest.mark.parametrize("store", ["moto"], indirect=True)
async def test_round_trip_on_s3(ledgers: LocalLedgerStore, store: ObjectStore) -> None:
    entries = payloads(random_sizes(11 * MiB, 4, big=2 * MiB), 4)
    source = await make_ledger(ledgers, entries)
    off = offloader(store)
    await off.offload(source, UUID, {"ManagedLedgerName": "t"})
    requests = dict(store.metrics.requests)
    assert requests["upload_part"] == 2  # 11 MiB: parts of at least 5 MiB (moto checks)
    assert requests["create_multipart"] == requests["complete_multipart"] == 1
    assert "upload_part_copy" not in requests
    await check_objects_are_pip17(store, source, entries)
    copy = await off.read_offloaded(source.ledger_id, UUID)
    await check_reads_identically(source, copy, entries, 4)
    await copy.close()
    info = await store.head(off.locate(source.ledger_id, UUID).data_key)
    assert info.metadata["managedledgername"] == "t"
    await off.delete_offloaded(source.ledger_id, UUID)
    assert await store.list_all("") == []
    assert await store.list_multipart_uploads("") == []


async def test_index_golden(ledgers: LocalLedgerStore, memory: MemoryObjectStore) -> None:
    """One block: the index is the 32-byte header, the ledger metadata, one entry."""
    source = await make_ledger(ledgers, [b"hello", b"", b"world!"])
    off = offloader(memory)
    await off.offload(source, UUID, {})
    location = off.locate(source.ledger_id, UUID)
    meta = source.metadata.to_bytes()
    data_len = 128 + 12 * 3 + 11
    expected = (
        struct.pack(">IiqqiI", 0xDE47DE47, 32 + len(meta) + 20, data_len, 128, 1, len(meta))
        + meta
        + struct.pack(">qiq", 0, 1, 0)
    )
    data = await memory.get(location.data_key)
    # Our checksum trailer after PIP-17's bytes: magic "TSK1", the block count,
    # each block's CRC32C, then the CRC32C of every byte before it.
    expected += struct.pack(">IiI", 0x54534B31, 1, crc32c(data))
    expected += struct.pack(">I", crc32c(expected))
    assert await memory.get(location.index_key) == expected
    assert location.data_key == f"offload/{UUID}-ledger-{source.ledger_id}"
    assert data == (
        struct.pack(">IqqQ", 0xFBDBABCB, 128, data_len, 0) + bytes(100)
        + struct.pack(">iq", 5, 0) + b"hello" + struct.pack(">iq", 0, 1)
        + struct.pack(">iq", 6, 2) + b"world!"
    )


async def test_pip17_names_are_recoverable(ledgers: LocalLedgerStore,
                                           memory: MemoryObjectStore) -> None:
    source = await make_ledger(ledgers, [b"x"] * 3)
    off = offloader(memory)
    await off.offload(source, UUID, {})
    keys = [o.key for o in await memory.list_all("")]
    assert keys == ["offload/" + data_object_name(source.ledger_id, UUID),
                    "offload/" + index_object_name(source.ledger_id, UUID)]
    for key in keys:
        name = parse_offload_key(key)
        assert name is not None and (name.uuid, name.ledger_id) == (UUID, source.ledger_id)
        assert name.is_index == key.endswith("-index")


async def test_open_and_empty_ledgers_are_refused(ledgers: LocalLedgerStore,
                                                  memory: MemoryObjectStore) -> None:
    off = offloader(memory)
    writer = await ledgers.create_ledger()
    await writer.append(b"entry")
    with pytest.raises(OffloadRefused, match="OPEN: only closed ledgers"):
        await off.offload(writer, UUID, {})
    empty = await ledgers.create_ledger()
    await empty.close()
    handle = await ledgers.open_ledger(empty.ledger_id)
    with pytest.raises(OffloadRefused, match="empty"):
        await off.offload(handle, UUID, {})
    assert await memory.list_all("") == []


async def test_entry_larger_than_a_block_gets_a_block_of_its_own(
        ledgers: LocalLedgerStore, memory: MemoryObjectStore) -> None:
    entries = [b"a" * 100, bytes(5 * MiB), b"b"]
    source = await make_ledger(ledgers, entries)
    off = offloader(memory)
    await off.offload(source, UUID, {})
    await check_objects_are_pip17(memory, source, entries)
    copy = await off.read_offloaded(source.ledger_id, UUID)
    assert await copy.read(0, 2) == [LedgerEntry(i, p) for i, p in enumerate(entries)]
    await off.delete_offloaded(source.ledger_id, UUID)
    assert await memory.list_all("") == []
    assert EntryTooLarge  # still raised by the fixed-block writer (test_stream)


async def test_extra_metadata_is_on_both_objects(ledgers: LocalLedgerStore,
                                                 memory: MemoryObjectStore) -> None:
    source = await make_ledger(ledgers, [b"x"])
    off = offloader(memory)
    await off.offload(source, UUID, {"ManagedLedgerName": "tenant/ns/t", "PulsarVersion": "3"})
    location = off.locate(source.ledger_id, UUID)
    for key in (location.data_key, location.index_key):
        meta = (await memory.head(key)).metadata
        assert meta["managedledgername"] == "tenant/ns/t"
        assert meta["pulsarversion"] == "3"
        assert meta["s3managedledgeroffloaderformatversion"] == "1"
        assert meta["ledger-id"] == str(source.ledger_id)
        assert sum(len(k) + len(v) for k, v in meta.items()) <= 2048


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"big": "x" * 2000}, "more than S3's limit of 2048"),
        ({"k": "caf\u00e9"}, "not printable ASCII"),
        ({"Key": "a", "key": "b"}, "collide"),
        ({"bad key": "a"}, "not an HTTP header token"),
    ],
)
async def test_bad_extra_metadata_is_refused_before_any_write(
    ledgers: LocalLedgerStore, memory: MemoryObjectStore, extra: Mapping[str, str],
    message: str,
) -> None:
    source = await make_ledger(ledgers, [b"x"])
    with pytest.raises(OffloadMetadataTooLarge, match=message):
        await offloader(memory).offload(source, UUID, extra)
    assert await memory.list_all("") == []


async def test_an_attempt_uuid_names_its_objects_once(ledgers: LocalLedgerStore,
                                                      memory: MemoryObjectStore) -> None:
    source = await make_ledger(ledgers, [b"x"] * 10)
    off = offloader(memory)
    await off.offload(source, UUID, {})
    with pytest.raises(OffloadExists):
        await off.offload(source, UUID, {})
    other = uuid.uuid4()
    await off.offload(source, other, {})  # a new attempt, beside it
    await off.delete_offloaded(source.ledger_id, UUID)
    assert list(await offload_objects(memory)) == [data_object_name(source.ledger_id, other)]
    await off.delete_offloaded(source.ledger_id, UUID)  # idempotent
    copy = await off.read_offloaded(source.ledger_id, other)
    assert len(await copy.read(0, 9)) == 10


class RacingStore(MemoryObjectStore):
    """Another writer of the same attempt writes its own bytes just before ours."""

    def __init__(self, key_suffix: str) -> None:
        super().__init__()
        self.key_suffix = key_suffix
        self.raced = False

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        if key.endswith(self.key_suffix) and not self.raced:
            self.raced = True
            other = b"another writer's bytes"
            theirs = dict(metadata or {})
            if "crc32c" in theirs:
                theirs["crc32c"] = format_crc(crc32c(other))
            await super().put(key, other, if_none_match=True, metadata=theirs)
        return await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


@pytest.mark.parametrize(("suffix", "error"), [
    (f"{UUID}-ledger-0", OffloadFenced),
    ("-index", OffloadFenced),
])
async def test_a_second_writer_of_the_attempt_is_fenced(
    ledgers: LocalLedgerStore, suffix: str, error: type[Exception]
) -> None:
    store = RacingStore(suffix)
    source = await make_ledger(ledgers, [b"x" * 1000] * 10)
    with pytest.raises(error):
        await offloader(store).offload(source, UUID, {})
    assert store.raced


async def test_retried_index_write_that_landed_is_success(ledgers: LocalLedgerStore,
                                                          memory: MemoryObjectStore) -> None:
    source = await make_ledger(ledgers, [b"x"] * 3)
    off = offloader(memory)
    await off.offload(source, UUID, {})
    location = off.locate(source.ledger_id, UUID)
    data = await memory.get(location.index_key)
    await off._put_index(location, data, {})  # the same bytes again: no error
    with pytest.raises(OffloadFenced):
        await off._put_index(location, data + b"x", {})


async def test_incomplete_attempt_is_not_readable(ledgers: LocalLedgerStore,
                                                  memory: MemoryObjectStore) -> None:
    source = await make_ledger(ledgers, [b"x"] * 3)
    off = offloader(memory)
    with pytest.raises(OffloadNotFound, match="no complete offload"):
        await off.read_offloaded(source.ledger_id, UUID)
    await off.offload(source, UUID, {})
    await memory.delete(off.locate(source.ledger_id, UUID).index_key)
    with pytest.raises(OffloadNotFound):
        await off.read_offloaded(source.ledger_id, UUID)


async def test_slices_of_a_namespace_without_prefix(ledgers: LocalLedgerStore,
                                                    memory: MemoryObjectStore) -> None:
    """An offload namespace with an empty prefix: its objects are at the
    bucket's root, where Pulsar looks, and planning finds them there."""
    entries = [b"entry %d" % i for i in range(5)]
    source = await make_ledger(ledgers, entries)
    space = OffloadNamespace("")
    off = SegmentLedgerOffloader(memory, options=OffloadOptions(
        block_size=5 * MiB, namespace=space))
    await off.offload(source, UUID, {})
    await off.close()
    await check_objects_are_pip17(memory, source, entries, prefix="")
    (part,) = await plan_ledger_slices(memory, space, LedgerSelection())
    assert (part.ledger_id, part.offload_uuid, part.first, part.last) == (
        source.ledger_id, str(UUID), 0, 4)
    read = [e async for batch in read_ledger_slice(memory, part) for e in batch]
    assert read == [LedgerEntry(i, p) for i, p in enumerate(entries)]


class LostReplyStore(MemoryObjectStore):
    """The data object's write lands, then its answer is lost and the retry
    finds the key taken: 412 (a PUT), or the upload gone (a completion)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[str] = []

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        info = await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
        if not key.endswith("-index") and not self.lost:
            self.lost.append("put")
            raise PreconditionFailed("the retry found the key taken", op="put", key=key)
        return info

    async def complete_multipart(self, key: str, upload_id: str, parts: Sequence[PartInfo], *,
                                 if_none_match: bool = False) -> ObjectInfo:
        await super().complete_multipart(key, upload_id, parts, if_none_match=if_none_match)
        self.lost.append("complete")
        raise NoSuchUpload("the retry found the upload completed", op="complete_multipart",
                           key=key)


@pytest.mark.parametrize("size", [10_000, 12 * MiB], ids=["one-put", "multipart"])
async def test_a_data_object_whose_reply_was_lost_is_ours(ledgers: LocalLedgerStore,
                                                          size: int) -> None:
    store = LostReplyStore()
    entries = payloads([size // 10] * 10, 5)
    source = await make_ledger(ledgers, entries)
    await offloader(store).offload(source, UUID, {})
    assert store.lost == ["complete" if size > 5 * MiB else "put"]
    await check_objects_are_pip17(store, source, entries)
    assert await store.list_multipart_uploads("") == []


class FlipOnce(ForwardingObjectStore):
    """Flips one bit of the payload of the first ``flips`` GETs of ``key``."""

    def __init__(self, inner: ObjectStore, key: str, flips: int) -> None:
        super().__init__(inner)
        self.key, self.flips = key, flips

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        got = await self.inner.get_object(key, byte_range)
        if key == self.key and self.flips > 0:
            self.flips -= 1
            data = bytearray(got.data)
            data[len(data) // 2] ^= 0x10
            return dataclasses.replace(got, data=bytes(data))
        return got


@pytest.mark.parametrize("what", ["data", "index"])
async def test_a_bit_flipped_in_transit_is_read_again_and_one_at_rest_is_corrupt(
        ledgers: LocalLedgerStore, memory: MemoryObjectStore, what: str) -> None:
    """PIP-17 has no checksum: our index's trailer holds each block's CRC32C and
    its own, so a changed byte is never returned as an entry."""
    entries = [bytes([i]) * 300 for i in range(40)]
    source = await make_ledger(ledgers, entries)
    await offloader(memory).offload(source, UUID, {})
    location = offloader(memory).locate(source.ledger_id, UUID)
    key = location.data_key if what == "data" else location.index_key
    once = FlipOnce(memory, key, flips=1)  # a read torn in transit: read again, right
    copy = await offloader(once).read_offloaded(source.ledger_id, UUID)
    assert [e.payload for e in await copy.read(0, 39)] == entries
    always = FlipOnce(memory, key, flips=99)  # damaged at rest: an error, no entry
    with pytest.raises(CorruptLedger, match="CRC32C"):
        copy = await offloader(always).read_offloaded(source.ledger_id, UUID)
        await copy.read(0, 39)
