"""Pulsar's own reader loop (``BlobStoreBackedReadHandleImpl.readAsync``),
replayed over the objects an offload writes: it ignores ``block_len``, reads
``[len int32][entry_id int64]`` on from wherever its stream is, and on a
negative length ("padding or new block") seeks to the data offset the index
gives for the next entry it wants. Our blocks are unpadded, so at a block's
end it reads the next block's magic ``0xFBDBABCB``: negative, so it must seek,
never take the header for an entry."""

from __future__ import annotations

import random
import struct
import uuid
from pathlib import Path

from tests.ledger.helpers import MiB, make_ledger, payloads
from tieredstore.ledger import LocalLedgerStore, OffloadOptions, SegmentLedgerOffloader
from tieredstore.ledger.index import OffloadIndex
from tieredstore.objectstore import MemoryObjectStore


class PulsarStream:
    """``BlobStoreBackedInputStreamImpl`` as ``DataInputStream`` sees it."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int) -> bytes:
        assert self.pos + n <= len(self.data), f"EOF at {self.pos} (+{n})"
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def read_int(self) -> int:
        return int(struct.unpack(">i", self.read(4))[0])

    def read_long(self) -> int:
        return int(struct.unpack(">q", self.read(8))[0])


def pulsar_read(stream: PulsarStream, index: OffloadIndex, first: int,
                last: int) -> list[tuple[int, bytes]]:
    """``readAsync(first, last)``, branch for branch."""
    def seek_to(entry_id: int) -> None:  # index.getIndexEntryForEntry(id).getDataOffset()
        stream.pos = index.lookup(entry_id).data_offset

    out: list[tuple[int, bytes]] = []
    seeked, expected, todo = False, first, last - first + 1
    if len(stream.data) - stream.pos < 12:
        seek_to(first)
    while todo > 0:
        length = stream.read_int()
        if length < 0:  # hit padding or new block
            seek_to(expected)
            continue
        entry_id = stream.read_long()
        if entry_id == expected:
            out.append((entry_id, stream.read(length)))
            todo, expected = todo - 1, expected + 1
        elif expected < entry_id < last or (
                entry_id < expected and index.lookup(expected) != index.lookup(entry_id)):
            seek_to(expected)  # Pulsar's two branches that seek to the wanted entry
        elif entry_id > last:
            assert not seeked, f"read {entry_id}, past the last entry {last}"
            seek_to(expected)
            seeked = True
        else:
            stream.pos += length  # skip an entry before the wanted one
    return out


async def test_pulsars_reader_reads_our_unpadded_blocks(tmp_path: Path) -> None:
    rng = random.Random(7)
    sizes = [rng.choice([0, 1, 100, 5000, 70_000, 300_000]) for _ in range(400)]
    entries = payloads(sizes, 7)
    source = await make_ledger(LocalLedgerStore(tmp_path, fsync=False), entries)
    store = MemoryObjectStore()
    offloader = SegmentLedgerOffloader(store, options=OffloadOptions(block_size=5 * MiB))
    attempt = uuid.uuid4()
    await offloader.offload(source, attempt, {})
    where = offloader.locate(source.ledger_id, attempt)
    stream = PulsarStream(await store.get(where.data_key))
    index = OffloadIndex.decode(await store.get(where.index_key))
    assert len(index.entries) > 10 and index.data_object_len > 5 * MiB  # blocks, parts
    last = len(entries) - 1
    # Front to back one entry at a time (crossing every block end), all at once,
    # then at random (seeking back and forth), on one stream, as a handle does.
    for i in range(len(entries)):
        assert pulsar_read(stream, index, i, i) == [(i, entries[i])], f"entry {i}"
    stream.pos = 0
    assert pulsar_read(stream, index, 0, last) == list(enumerate(entries))
    for _ in range(200):
        a = rng.randint(0, last)
        b = min(last, a + rng.choice([0, 1, 3, 40]))
        assert pulsar_read(stream, index, a, b) == [(i, entries[i]) for i in range(a, b + 1)]
