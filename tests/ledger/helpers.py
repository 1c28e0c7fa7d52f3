"""Builders and fault-injecting stores for the ledger tests."""

from __future__ import annotations

import random
import struct
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass

import crc32c

from tests.ledger.pulsar_blocks import BlockStreamWriter
from tieredstore.errors import ObjectStoreError
from tieredstore.ledger import LocalLedgerStore, LocalReadHandle
from tieredstore.ledger.block import BlockPlan
from tieredstore.ledger.format import BytesLike
from tieredstore.ledger.offload.location import parse_offload_key
from tieredstore.objectstore import (
    ByteRange,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
    UploadInfo,
)

KiB = 1024
MiB = 1024 * KiB


def payloads(sizes: Sequence[int], seed: int = 0) -> list[bytes]:
    """Random payloads of these sizes (the same for the same seed)."""
    rng = random.Random(seed)
    return [rng.randbytes(n) for n in sizes]


def random_sizes(total: int, seed: int, *, big: int = 3 * MiB) -> list[int]:
    """Entry sizes from 0 bytes to ``big``, summing to about ``total``."""
    rng = random.Random(seed)
    sizes: list[int] = []
    while sum(sizes) < total:
        kind = rng.random()
        if kind < 0.1:
            sizes.append(0)
        elif kind < 0.6:
            sizes.append(rng.randint(1, 4 * KiB))
        elif kind < 0.9:
            sizes.append(rng.randint(4 * KiB, 512 * KiB))
        else:
            sizes.append(rng.randint(512 * KiB, big))
    return sizes


async def make_ledger(store: LocalLedgerStore, entries: Sequence[bytes], *,
                      batch: int = 64) -> LocalReadHandle:
    """A closed ledger holding ``entries``, opened for reading."""
    writer = await store.create_ledger()
    for i in range(0, len(entries), batch):
        await writer.append_many(entries[i : i + batch])
    await writer.close()
    return await store.open_ledger(writer.ledger_id)


@dataclass(frozen=True)
class WrittenBlock:
    """One data block as the stream writer wrote it: its plan and its bytes."""

    plan: BlockPlan
    data: bytes

    @property
    def first_entry_id(self) -> int:
        return self.plan.first_entry_id

    @property
    def end_entry_id(self) -> int:
        return self.plan.end_entry_id

    @property
    def entry_count(self) -> int:
        return self.plan.entry_count

    @property
    def block_len(self) -> int:
        return self.plan.block_len

    @property
    def payload_bytes(self) -> int:
        return self.plan.payload_bytes

    @property
    def crc(self) -> int | None:
        return self.plan.crc


def stream_blocks(entries: Iterable[tuple[int, BytesLike]], block_size: int, *,
                  min_block_size: int = 0) -> list[WrittenBlock]:
    """``(entry_id, payload)`` pairs written by the library's one encoder,
    :class:`BlockStreamWriter`, cut into its blocks."""
    entries = list(entries)
    if not entries:
        return []
    writer = BlockStreamWriter(
        first_entry_id=entries[0][0], last_entry_id=entries[-1][0],
        length=sum(memoryview(p).nbytes for _, p in entries),
        block_size=block_size, min_block_size=min_block_size,
    )
    out: list[BytesLike] = []
    for entry_id, payload in entries:
        out += writer.add(entry_id, payload)
    out += writer.finish()
    data = b"".join(bytes(b) for b in out)
    blocks, offset = [], 0
    for plan in writer.blocks:
        blocks.append(WrittenBlock(plan, data[offset : offset + plan.block_len]))
        offset += plan.block_len
    assert offset == len(data) == writer.bytes_written
    return blocks


def reference_blocks(entries: Sequence[tuple[int, bytes]], block_size: int
                     ) -> list[tuple[int, int, bytes]]:
    """``(first entry id, entry count, bytes)`` of each block, packed all at once
    from the format's text alone (an oracle for the stream writer): greedy, an
    entry that does not fit the rest of a block starts the next one; every block
    but the last is ``block_size`` bytes padded with ``FE DC DE AD ...``, the last
    is sized exactly."""
    out, i = [], 0
    while i < len(entries):
        first, used = i, 128
        while i < len(entries) and (i == first or used + 12 + len(entries[i][1]) <= block_size):
            used += 12 + len(entries[i][1])
            i += 1
        size = block_size if i < len(entries) else used
        head = struct.pack(">IqqQ", 0xFBDBABCB, 128, size, entries[first][0]) + bytes(100)
        body = b"".join(struct.pack(">iq", len(p), e) + p for e, p in entries[first:i])
        pad = (b"\xfe\xdc\xde\xad" * (size // 4 + 1))[: size - used]
        out.append((entries[first][0], i - first, head + body + pad))
    return out


class Clock:
    """An injectable clock: seconds since the epoch, moved by hand."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class InjectedFault(ObjectStoreError):
    """The failure a FaultyStore was told to raise."""


@dataclass
class _Fault:
    op: str
    nth: int
    match: str | None
    after: bool = False  # let the call land, then fail (a lost answer)
    seen: int = 0
    fired: bool = False


class FaultyStore(ObjectStore):
    """Wraps a store; raises :class:`InjectedFault` on the ``nth`` call of an
    operation (whose key contains ``match``, if given), before the call
    reaches the inner store. Shares the inner store's request metrics."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(chokepoint=inner.chokepoint)
        self.inner = inner
        self.name = inner.name
        self.faults: list[_Fault] = []
        self.calls: list[tuple[str, str]] = []

    def fail(self, op: str, nth: int = 1, *, match: str | None = None,
             after: bool = False) -> None:
        """Fail the ``nth`` call of ``op`` (on keys containing ``match``); with
        ``after``, once the call has landed, as if its answer were lost."""
        self.faults.append(_Fault(op, nth, match, after))

    def disarm(self) -> None:
        self.faults.clear()

    @property
    def fired(self) -> list[str]:
        return [f"{f.op}#{f.nth}" for f in self.faults if f.fired]

    def _check(self, op: str, key: str) -> _Fault | None:
        """Raise now for a fault before the call; return one due after it."""
        self.calls.append((op, key))
        for fault in self.faults:
            if fault.op == op and not fault.fired and (fault.match is None or fault.match in key):
                fault.seen += 1
                if fault.seen == fault.nth:
                    fault.fired = True
                    if fault.after:
                        return fault
                    raise InjectedFault(f"injected failure of {op} #{fault.nth} on {key!r}",
                                        op=op, key=key)
        return None

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        late = self._check("put", key)
        info = await self.inner.put(key, data, if_none_match=if_none_match, metadata=metadata)
        if late is not None:
            raise InjectedFault(f"put of {key!r} landed, its answer is lost", op="put", key=key)
        return info

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        self._check("get", key)
        return await self.inner.get_object(key, byte_range)

    async def head(self, key: str) -> ObjectInfo:
        self._check("head", key)
        return await self.inner.head(key)

    async def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        self._check("list", prefix)
        async for page in self.inner.list_pages(prefix):
            yield page

    async def delete_many(self, keys: Sequence[str]) -> None:
        self._check("delete", ",".join(keys))
        await self.inner.delete_many(keys)

    async def create_multipart(self, key: str, *, metadata: Mapping[str, str] | None = None
                               ) -> str:
        self._check("create_multipart", key)
        return await self.inner.create_multipart(key, metadata=metadata)

    async def upload_part(self, key: str, upload_id: str, part_number: int,
                          data: bytes | memoryview) -> PartInfo:
        self._check("upload_part", key)
        return await self.inner.upload_part(key, upload_id, part_number, data)

    async def upload_part_copy(self, key: str, upload_id: str, part_number: int,
                               source_key: str, source_range: ByteRange) -> PartInfo:
        self._check("upload_part_copy", key)
        return await self.inner.upload_part_copy(key, upload_id, part_number, source_key,
                                                 source_range)

    async def complete_multipart(self, key: str, upload_id: str, parts: Sequence[PartInfo], *,
                                 if_none_match: bool = False) -> ObjectInfo:
        due = self._check("complete_multipart", key)
        info = await self.inner.complete_multipart(key, upload_id, parts,
                                                   if_none_match=if_none_match)
        if due is not None:
            raise InjectedFault(f"injected lost answer of complete_multipart on {key!r}",
                                op="complete_multipart", key=key)
        return info

    async def abort_multipart(self, key: str, upload_id: str) -> None:
        self._check("abort_multipart", key)
        await self.inner.abort_multipart(key, upload_id)

    async def list_multipart_uploads(self, prefix: str) -> list[UploadInfo]:
        self._check("list_multipart_uploads", prefix)
        return await self.inner.list_multipart_uploads(prefix)


async def offload_objects(store: ObjectStore, prefix: str = "offload/") -> dict[str, list[str]]:
    """Every offload object, keyed by the PIP-17 data object name it belongs to."""
    out: dict[str, list[str]] = {}
    for info in await store.list_all(prefix):
        name = parse_offload_key(info.key)
        assert name is not None, f"{info.key!r} carries no PIP-17 name"
        data_name = f"{name.uuid}-ledger-{name.ledger_id}"
        out.setdefault(data_name, []).append(info.key)
    return out


def parse_pip17(data: bytes, index: bytes) -> tuple[list[tuple[int, bytes]],
                                                     list[tuple[int, int, int]], bytes]:
    """Decode an offloaded ledger as PIP-17's text describes it, with struct alone
    (no code of the writer): the entries ``(id, payload)`` found by walking the
    data object block by block, the index's ``(first_entry_id, part, offset)``
    mappings (each checked against the block at its offset), and the ledger
    metadata bytes the index carries."""
    magic, index_len, object_len, header_len, count, meta_len = struct.unpack_from(
        ">IiqqiI", index, 0)
    assert magic == 0xDE47DE47 and index_len == 32 + meta_len + 20 * count
    assert header_len == 128 and object_len == len(data)
    # Pulsar reads index_len bytes; our checksum trailer follows them.
    assert len(index) == index_len + 8 + 4 * (count + 1), "the checksum trailer follows"
    trailer_magic, trailer_count = struct.unpack_from(">Ii", index, index_len)
    assert (trailer_magic, trailer_count) == (0x54534B31, count)
    crcs = struct.unpack_from(f">{count}I", index, index_len + 8)
    assert struct.unpack_from(">I", index, len(index) - 4)[0] == crc32c.crc32c(index[:-4])
    meta = index[32:32 + meta_len]
    mappings = [struct.unpack_from(">qiq", index, 32 + meta_len + 20 * i) for i in range(count)]
    entries: list[tuple[int, bytes]] = []
    offset = 0
    for (first_id, _part, block_offset), crc in zip(mappings, crcs, strict=True):
        assert block_offset == offset, "blocks are back to back, in index order"
        block_magic, block_header_len, block_len, block_first = struct.unpack_from(
            ">Iqqq", data, offset)
        assert crc32c.crc32c(data[offset:offset + block_len]) == crc, "the block's CRC32C"
        assert (block_magic, block_header_len, block_first) == (0xFBDBABCB, 128, first_id)
        assert data[offset + 28:offset + 128] == bytes(100)
        pos, end = offset + 128, offset + block_len
        while pos + 12 <= end:
            length, entry_id = struct.unpack_from(">iq", data, pos)
            if length < 0:  # padding 0xFEDCDEAD to the block end
                break
            entries.append((entry_id, data[pos + 12:pos + 12 + length]))
            pos += 12 + length
        offset = end
    assert offset == len(data)
    return entries, mappings, meta
