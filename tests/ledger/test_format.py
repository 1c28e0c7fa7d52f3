"""PIP-17 codec: golden bytes built by hand from the format, round trips, errors.

The expected bytes in the golden tests come from ``struct.pack`` with explicit
big-endian formats and from hex literals, never from the encoder under test
(:class:`~tests.ledger.pulsar_blocks.BlockStreamWriter`, Pulsar's encoder).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.ledger.helpers import WrittenBlock, stream_blocks
from tests.ledger.pulsar_blocks import BlockStreamWriter, next_block_size
from tieredstore.errors import TieredStoreError
from tieredstore.ledger.block import BlockScan, decode_entries
from tieredstore.ledger.format import (
    HEADER_SIZE,
    MIN_BLOCK_SIZE,
    BytesLike,
    DataBlockHeader,
    EntryOutOfRange,
    EntryTooLarge,
    LedgerFormatError,
    data_object_name,
    index_object_name,
    padding,
    parse_object_name,
)
from tieredstore.ledger.index import IndexEntry, OffloadIndex, parse_ledger_metadata
from tieredstore.ledger.ledger_metadata_pb2 import LedgerMetadataFormat

# --- hand-built expectations --------------------------------------------------


def header_bytes(block_len: int, first_entry_id: int) -> bytes:
    """magic int32, header_len int64 = 128, block_len int64, first_entry_id int64, zeros."""
    head = struct.pack(">IqqQ", 0xFBDBABCB, 128, block_len, first_entry_id)
    assert len(head) == 28
    return head + bytes(100)


def entry_bytes(entry_id: int, payload: bytes) -> bytes:
    return struct.pack(">iq", len(payload), entry_id) + payload


# BookKeeper LedgerMetadataFormat, encoded by hand (tag = field << 3 | wire type):
# quorumSize=2, ensembleSize=3, length=15, lastEntryId=1, state=CLOSED,
# segment {ensembleMember "b1:3181", firstEntryId 0}, digestType=CRC32C,
# ackQuorumSize=2, ctime=1.
METADATA = bytes.fromhex(
    "0802"  # 1 quorumSize varint 2
    "1003"  # 2 ensembleSize varint 3
    "180f"  # 3 length varint 15
    "2001"  # 4 lastEntryId varint 1
    "2803"  # 5 state varint CLOSED=3
    "320b 0a07 62313a33313831 1000"  # 6 segment, 11 bytes: member "b1:3181", firstEntryId 0
    "3803"  # 7 digestType varint CRC32C=3
    "4802"  # 9 ackQuorumSize varint 2
    "5001"  # 10 ctime varint 1
)

PAD15 = bytes.fromhex("FEDCDEAD FEDCDEAD FEDCDEAD FEDCDE")

# A two-block ledger, block size 160: entry 0 (5 bytes) ends block 0 at offset 145;
# entry 1 (10 bytes) needs 22 bytes, only 15 remain, so it opens block 1, which
# is sized exactly: 128 + 12 + 10 = 150.
BLOCK0 = header_bytes(160, 0) + entry_bytes(0, b"hello") + PAD15
BLOCK1 = header_bytes(150, 1) + entry_bytes(1, b"0123456789")
LEDGER = [(0, b"hello"), (1, b"0123456789")]


def blocks(entries: Sequence[tuple[int, BytesLike]], block_size: int) -> list[WrittenBlock]:
    return stream_blocks(entries, block_size)


def exact_block_size(payload_sizes: Iterable[int]) -> int:
    """A block holding entries of these sizes and no padding."""
    return HEADER_SIZE + sum(12 + size for size in payload_sizes)


def decode_block(data: BytesLike, *, partial: bool = False) -> tuple[DataBlockHeader, BlockScan]:
    """A block from its start: its header, then its entries (``partial``: of a prefix)."""
    header = DataBlockHeader.decode(data)
    scan = decode_entries(memoryview(data)[HEADER_SIZE:], offset=HEADER_SIZE,
                          block_len=header.block_len, expected_entry_id=header.first_entry_id,
                          partial=partial)
    return header, scan


# --- golden bytes ------------------------------------------------------------


def test_header_golden() -> None:
    expected = bytes.fromhex(
        "FBDBABCB"  # magic
        "0000000000000080"  # header_len 128
        "0000000004000000"  # block_len 64 MiB
        "0000000000000007"  # first_entry_id 7
    ) + bytes(100)
    assert DataBlockHeader(block_len=64 * 1024 * 1024, first_entry_id=7).encode() == expected
    assert DataBlockHeader.decode(expected) == DataBlockHeader(64 * 1024 * 1024, 7)


def test_entry_golden() -> None:
    # One entry: the whole (last) block is header + [len][id][payload], no padding.
    (block,) = blocks([(42, b"abc")], 1000)
    expected = header_bytes(143, 42) + bytes.fromhex("00000003 000000000000002A 616263")
    assert block.data == expected
    assert (block.first_entry_id, block.entry_count, block.block_len) == (42, 1, 143)


def test_empty_entry_golden() -> None:
    (block,) = blocks([(0, b""), (1, b"")], 1000)
    assert block.data == header_bytes(152, 0) + bytes.fromhex(
        "00000000 0000000000000000 00000000 0000000000000001"
    )


def test_padding_starts_at_odd_offset_golden() -> None:
    # Padding begins at block offset 145 (145 % 4 == 1) and still starts with FE:
    # Pulsar restarts the cycle at the first padding byte, not at a block-aligned phase.
    block0 = blocks(LEDGER, 160)[0]
    assert block0.data == BLOCK0
    assert BLOCK0[145:] == bytes.fromhex("FEDCDEADFEDCDEADFEDCDEADFEDCDE")
    assert len(BLOCK0) == 160


def test_two_block_ledger_with_spill_golden() -> None:
    out = blocks(LEDGER, 160)
    assert [b.data for b in out] == [BLOCK0, BLOCK1]
    assert [(b.first_entry_id, b.entry_count, b.payload_bytes) for b in out] == [
        (0, 1, 5),
        (1, 1, 10),
    ]


def test_short_padding_and_no_padding_golden() -> None:
    # 3 bytes left: padding FE DC DE.
    out = blocks([(0, b"x" * 9), (1, b"")], 152)
    assert out[0].data == header_bytes(152, 0) + entry_bytes(0, b"x" * 9) + b"\xfe\xdc\xde"
    # Entry 0 fills the block exactly: no padding, entry 1 opens the next block.
    out = blocks([(0, b"x" * 12), (1, b"")], 152)
    assert out[0].data == header_bytes(152, 0) + entry_bytes(0, b"x" * 12)
    assert out[1].data == header_bytes(140, 1) + entry_bytes(1, b"")


def test_last_block_exact_size() -> None:
    sizes = [100, 0, 37, 250]
    entries = [(i, bytes(s)) for i, s in enumerate(sizes)]
    out = blocks(entries, 1 << 20)
    assert len(out) == 1
    assert out[0].block_len == 128 + (12 + 100) + 12 + (12 + 37) + (12 + 250) == 563
    assert len(out[0].data) == 563
    # With spills: every block but the last is the block size, the last is exact.
    out = blocks(entries, 400)
    assert [b.block_len for b in out] == [400, 128 + 12 + 250]
    assert [b.entry_count for b in out] == [3, 1]
    assert [len(b.data) for b in out] == [400, 390]


def test_ledger_metadata_golden() -> None:
    # Our .proto has BookKeeper's field numbers: the bytes are what Pulsar stores.
    msg = LedgerMetadataFormat(
        quorumSize=2,
        ensembleSize=3,
        length=15,
        lastEntryId=1,
        state=LedgerMetadataFormat.CLOSED,
        segment=[LedgerMetadataFormat.Segment(ensembleMember=["b1:3181"], firstEntryId=0)],
        digestType=LedgerMetadataFormat.CRC32C,
        ackQuorumSize=2,
        ctime=1,
    )
    assert msg.SerializeToString() == METADATA
    assert parse_ledger_metadata(METADATA) == msg


INDEX = (
    struct.pack(">IiqqiI", 0xDE47DE47, 32 + len(METADATA) + 2 * 20, 310, 128, 2, len(METADATA))
    + METADATA
    + struct.pack(">qiq", 0, 1, 0)
    + struct.pack(">qiq", 1, 2, 160)
)


def test_index_golden_two_blocks() -> None:
    assert len(INDEX) == 101  # index_len counts the whole object, header included
    assert INDEX[:8] == bytes.fromhex("DE47DE47 00000065")
    index = OffloadIndex.for_blocks(blocks(LEDGER, 160), METADATA)
    assert index == OffloadIndex(310, 128, METADATA, [IndexEntry(0, 1, 0), IndexEntry(1, 2, 160)])
    assert index.encode() == INDEX
    assert OffloadIndex.decode(INDEX) == index
    assert index.last_entry_id == 1
    assert index.metadata.state == LedgerMetadataFormat.CLOSED


def test_object_names_golden() -> None:
    u = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    assert data_object_name(42, u) == "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-ledger-42"
    assert index_object_name(42, str(u).upper()) == (
        "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-ledger-42-index"
    )
    parsed = parse_object_name("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-ledger-42-index")
    assert (parsed.uuid, parsed.ledger_id, parsed.is_index) == (u, 42, True)
    assert not parse_object_name(data_object_name(0, u)).is_index
    for bad in ["x-ledger-1", f"{u}-ledger-", f"{u}-ledger-01", f"{u}-ledger-1-idx", f"{u}/x"]:
        with pytest.raises(LedgerFormatError):
            parse_object_name(bad)
    with pytest.raises(LedgerFormatError, match="not a UUID"):
        data_object_name(1, "nope")
    with pytest.raises(LedgerFormatError):
        data_object_name(-1, u)


# --- decoding ------------------------------------------------------------------


def payloads(scan: BlockScan) -> list[tuple[int, bytes, int]]:
    return [(e.entry_id, bytes(e.payload), e.offset) for e in scan.entries]


def test_decode_golden_blocks() -> None:
    header, scan = decode_block(BLOCK0)
    assert header == DataBlockHeader(160, 0)
    assert payloads(scan) == [(0, b"hello", 128)]
    assert (scan.next_offset, scan.at_end, scan.next_entry_id) == (145, True, 1)
    header, scan = decode_block(BLOCK1)
    assert header == DataBlockHeader(150, 1)
    assert payloads(scan) == [(1, b"0123456789", 128)]
    assert (scan.next_offset, scan.at_end) == (150, True)


def test_decode_partial_and_resume() -> None:
    block = blocks([(5, b"aaaa"), (6, b""), (7, b"bbbbbbbb")], 1000)[0].data
    # Cut inside entry 6's header: entry 5 only, resume at entry 6.
    _, scan = decode_block(block[: 128 + 16 + 5], partial=True)
    assert payloads(scan) == [(5, b"aaaa", 128)]
    assert (scan.next_offset, scan.at_end) == (144, False)
    rest = decode_entries(
        block[144:], offset=144, block_len=len(block), expected_entry_id=6, partial=False
    )
    assert payloads(rest) == [(6, b"", 144), (7, b"bbbbbbbb", 156)]
    assert rest.at_end
    # Only the header: nothing yet.
    _, scan = decode_block(block[:128], partial=True)
    assert (scan.entries, scan.next_offset, scan.at_end) == ([], 128, False)


def test_decode_partial_padding() -> None:
    # Stopping inside the padding: the block has no more entries.
    _, scan = decode_block(BLOCK0[:150], partial=True)
    assert payloads(scan) == [(0, b"hello", 128)]
    assert (scan.next_offset, scan.at_end) == (145, True)


# --- errors ------------------------------------------------------------------


def test_oversized_entry_is_an_error_naming_it() -> None:
    # block 200: room for 200 - 128 - 12 = 60 payload bytes at most.
    assert len(blocks([(0, bytes(60))], 200)) == 1
    with pytest.raises(EntryTooLarge) as err:
        blocks([(0, b"a"), (1, bytes(61)), (2, b"b")], 200)
    assert (err.value.entry_id, err.value.payload_len, err.value.block_size) == (1, 61, 200)
    assert "entry 1" in str(err.value) and "61" in str(err.value) and "200" in str(err.value)
    assert isinstance(err.value, ValueError) and isinstance(err.value, TieredStoreError)


def test_block_size_limits() -> None:
    with pytest.raises(LedgerFormatError, match="block size 1024"):
        BlockStreamWriter(last_entry_id=0, length=0, block_size=1024)  # default minimum: 5 MiB
    assert len(stream_blocks([(0, b"")], MIN_BLOCK_SIZE, min_block_size=MIN_BLOCK_SIZE)) == 1
    with pytest.raises(LedgerFormatError, match="block size 139"):
        blocks([(0, b"")], 139)
    with pytest.raises(LedgerFormatError):
        blocks([(0, b"")], 2**31)


def test_entry_ids_must_be_consecutive() -> None:
    with pytest.raises(LedgerFormatError, match="got 2, expected 1"):
        blocks([(0, b""), (2, b"")], 1000)
    with pytest.raises(LedgerFormatError):
        blocks([(-1, b"")], 1000)


def test_bad_values_are_refused() -> None:
    with pytest.raises(LedgerFormatError, match="negative ledger length"):
        BlockStreamWriter(last_entry_id=1, length=-1, block_size=1000, min_block_size=0)
    with pytest.raises(LedgerFormatError, match="first_entry_id"):
        DataBlockHeader(block_len=200, first_entry_id=-1)
    with pytest.raises(LedgerFormatError, match="block_len"):
        DataBlockHeader(block_len=100, first_entry_id=0)
    with pytest.raises(LedgerFormatError, match="outside the block"):
        decode_entries(b"", offset=100, block_len=200)


def test_bad_magic() -> None:
    bad = b"\xfb\xdb\xab\xcc" + BLOCK0[4:]
    with pytest.raises(LedgerFormatError, match="magic is 0xFBDBABCC"):
        decode_block(bad)
    with pytest.raises(LedgerFormatError, match="magic"):
        OffloadIndex.decode(b"\xde\x47\xde\x48" + INDEX[4:])


def test_bad_header_len() -> None:
    bad = BLOCK0[:4] + struct.pack(">q", 64) + BLOCK0[12:]
    with pytest.raises(LedgerFormatError, match="header_len is 64"):
        DataBlockHeader.decode(bad)
    with pytest.raises(LedgerFormatError, match="needs 128 bytes"):
        DataBlockHeader.decode(BLOCK0[:127])


def test_truncated_block() -> None:
    with pytest.raises(LedgerFormatError, match="truncated"):
        decode_block(BLOCK1[:-1])
    with pytest.raises(LedgerFormatError, match="run past"):
        decode_block(BLOCK1 + b"\x00")
    # An entry whose length runs past the block end, even in a prefix.
    bad = header_bytes(150, 1) + struct.pack(">iq", 11, 1) + b"0123456789"
    with pytest.raises(LedgerFormatError, match="length 11"):
        decode_block(bad)
    with pytest.raises(LedgerFormatError, match="length 11"):
        decode_block(bad[:145], partial=True)


def test_corrupt_padding_and_ids() -> None:
    with pytest.raises(LedgerFormatError, match="padding"):
        decode_block(BLOCK0[:-1] + b"\x00")
    with pytest.raises(LedgerFormatError, match="id 1, expected 0"):
        decode_block(header_bytes(150, 0) + entry_bytes(1, b"0123456789"))


def test_lookup() -> None:
    index = OffloadIndex.decode(INDEX)
    assert index.lookup(0) == IndexEntry(0, 1, 0)
    assert index.lookup(1) == IndexEntry(1, 2, 160)
    assert index.lookup(1).data_offset == 288
    assert [index.block_len(e) for e in index.entries] == [160, 150]


def test_lookup_past_the_end() -> None:
    index = OffloadIndex.decode(INDEX)
    with pytest.raises(EntryOutOfRange, match="entry 2 is not in the offloaded ledger"):
        index.lookup(2)
    with pytest.raises(IndexError):
        index.lookup(-1)


def test_bad_index() -> None:
    with pytest.raises(LedgerFormatError, match="header says 100"):
        OffloadIndex.decode(INDEX[:4] + struct.pack(">i", 100) + INDEX[8:])
    with pytest.raises(LedgerFormatError, match="the object has 100"):
        OffloadIndex.decode(INDEX[:-1])
    with pytest.raises(LedgerFormatError, match="at least 32"):
        OffloadIndex.decode(INDEX[:31])
    with pytest.raises(LedgerFormatError, match="required fields"):
        OffloadIndex(310, 128, bytes.fromhex("0802"), [IndexEntry(0, 1, 0)])
    with pytest.raises(LedgerFormatError, match="not valid protobuf"):
        OffloadIndex(310, 128, b"\xff", [IndexEntry(0, 1, 0)])
    with pytest.raises(LedgerFormatError, match="part id 3"):
        OffloadIndex(310, 128, METADATA, [IndexEntry(0, 1, 0), IndexEntry(1, 3, 160)])
    with pytest.raises(LedgerFormatError, match="does not follow"):
        OffloadIndex(310, 128, METADATA, [IndexEntry(0, 1, 0), IndexEntry(0, 2, 160)])
    with pytest.raises(LedgerFormatError, match="past the data object"):
        OffloadIndex(160, 128, METADATA, [IndexEntry(0, 1, 0), IndexEntry(1, 2, 160)])
    with pytest.raises(LedgerFormatError, match="at least one block"):
        OffloadIndex(310, 128, METADATA, [])
    with pytest.raises(LedgerFormatError, match="data_header_len"):
        OffloadIndex(310, 64, METADATA, [IndexEntry(0, 1, 0)])


def test_padding_function() -> None:
    assert padding(0) == b""
    assert padding(1) == b"\xfe"
    assert padding(6) == bytes.fromhex("FEDCDEADFEDC")


# --- properties --------------------------------------------------------------

sizes_st = st.lists(st.one_of(st.just(0), st.integers(0, 300)), max_size=60)


def ledger(sizes: list[int], first: int) -> list[tuple[int, bytes]]:
    return [(first + i, bytes([i % 251]) * s) for i, s in enumerate(sizes)]


def metadata_for(last_entry_id: int, length: int) -> bytes:
    return LedgerMetadataFormat(
        quorumSize=2,
        ensembleSize=2,
        length=length,
        lastEntryId=last_entry_id,
        state=LedgerMetadataFormat.CLOSED,
    ).SerializeToString()


@settings(max_examples=300, deadline=None)
@given(sizes=sizes_st, block_size=st.integers(140, 700), first=st.integers(0, 10**6))
def test_round_trip(sizes: list[int], block_size: int, first: int) -> None:
    sizes = [min(s, block_size - 140) for s in sizes]
    entries = ledger(sizes, first)
    out = blocks(entries, block_size)
    decoded: list[tuple[int, bytes]] = []
    for i, block in enumerate(out):
        data = block.data
        assert len(data) == block.block_len
        held = entries[block.first_entry_id - first : block.end_entry_id - first]
        if i < len(out) - 1:
            assert block.block_len == block_size
            # Greedy: the next block's first entry did not fit in this one's padding.
            nxt = sizes[block.end_entry_id - first]
            assert exact_block_size(len(p) for _, p in held) + 12 + nxt > block_size
        else:
            assert block.block_len == exact_block_size(len(p) for _, p in held)
        header, scan = decode_block(data)
        assert header.first_entry_id == block.first_entry_id and scan.at_end
        decoded += [(e.entry_id, bytes(e.payload)) for e in scan.entries]
        assert block.payload_bytes == sum(len(p) for _, p in held)
    assert decoded == entries


def pulsar_blocks(sizes: list[int], max_block: int) -> list[tuple[int, int, int]]:
    """Pulsar's offload loop: calculateBlockSize, then fill the block greedily."""
    lac, length = len(sizes) - 1, sum(sizes)
    start = written = 0
    out = []
    while start <= lac:
        size = min(max_block, (lac - start + 1) * 12 + (length - written) + 128)
        used, n = 128, 0
        while start + n <= lac and used + 12 + sizes[start + n] <= size:
            used += 12 + sizes[start + n]
            n += 1
        out.append((start, n, size))
        written += sum(sizes[start : start + n])
        start += n
    return out


@settings(max_examples=300, deadline=None)
@given(sizes=sizes_st, block_size=st.integers(140, 700))
def test_same_blocks_as_pulsar(sizes: list[int], block_size: int) -> None:
    sizes = [min(s, block_size - 140) for s in sizes]
    plans = [b.plan for b in blocks(ledger(sizes, 0), block_size)]
    assert [(p.first_entry_id, p.entry_count, p.block_len) for p in plans] == pulsar_blocks(
        sizes, block_size
    )
    for p in plans:
        rest = sizes[p.first_entry_id :]
        assert next_block_size(block_size, len(rest), sum(rest)) == p.block_len


@settings(max_examples=200, deadline=None)
@given(
    sizes=sizes_st.filter(bool),
    block_size=st.integers(140, 500),
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
)
def test_partial_reads_resume(sizes: list[int], block_size: int, cuts: list[int]) -> None:
    """Read each block in ranges cut anywhere; resuming at next_offset loses nothing."""
    sizes = [min(s, block_size - 140) for s in sizes]
    entries = ledger(sizes, 0)
    decoded: list[tuple[int, bytes]] = []
    for block in blocks(entries, block_size):
        data = block.data
        ends = sorted({128 + c % (len(data) - 127) for c in cuts} | {len(data)})
        header, scan = decode_block(data[: ends[0]], partial=True)
        got = list(scan.entries)
        for end in ends[1:]:
            if scan.at_end:
                break
            start = scan.next_offset
            scan = decode_entries(
                data[start:end], offset=start, block_len=header.block_len, partial=True
            )
            got += scan.entries
        assert scan.at_end
        decoded += [(e.entry_id, bytes(e.payload)) for e in got]
    assert decoded == entries


@settings(max_examples=200, deadline=None)
@given(sizes=sizes_st.filter(bool), block_size=st.integers(140, 500), first=st.integers(0, 99))
def test_index_round_trip_and_lookup(sizes: list[int], block_size: int, first: int) -> None:
    sizes = [min(s, block_size - 140) for s in sizes]
    plans = [b.plan for b in blocks(ledger(sizes, first), block_size)]
    last = first + len(sizes) - 1
    index = OffloadIndex.for_blocks(plans, metadata_for(last, sum(sizes)))
    data = index.encode()
    assert len(data) == struct.unpack_from(">i", data, 4)[0]
    assert OffloadIndex.decode(data) == index
    assert index.data_object_len == sum(p.block_len for p in plans)
    for entry_id in range(first, last + 1):
        found = index.lookup(entry_id)
        plan = plans[found.part_id - 1]
        assert plan.first_entry_id <= entry_id < plan.end_entry_id
        assert index.block_len(found) == plan.block_len
    with pytest.raises(EntryOutOfRange):
        index.lookup(last + 1)
    if first:
        with pytest.raises(EntryOutOfRange):
            index.lookup(first - 1)


def test_payloads_are_not_copied() -> None:
    big = bytearray(b"z" * 1000)
    writer = BlockStreamWriter(last_entry_id=1, length=1010, block_size=4096, min_block_size=0)
    assert any(chunk is big for chunk in writer.add(0, big))
    (block,) = blocks([(0, big), (1, memoryview(b"q" * 10))], 4096)
    assert block.data == header_bytes(1162, 0) + entry_bytes(0, bytes(big)) + entry_bytes(
        1, b"q" * 10
    )
