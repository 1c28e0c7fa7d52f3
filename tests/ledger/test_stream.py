"""The streaming block writer makes exactly the PIP-17 bytes, and refuses what
does not add up."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.ledger.helpers import reference_blocks
from tests.ledger.pulsar_blocks import BlockStreamWriter
from tests.ledger.test_format import BLOCK0, BLOCK1, LEDGER, entry_bytes, header_bytes
from tieredstore.ledger.format import (
    MIN_BLOCK_SIZE,
    BytesLike,
    EntryTooLarge,
    LedgerFormatError,
)


def stream(entries: list[tuple[int, bytes]], block_size: int, *, length: int | None = None
           ) -> tuple[bytes, BlockStreamWriter]:
    writer = BlockStreamWriter(
        last_entry_id=entries[-1][0], first_entry_id=entries[0][0],
        length=sum(len(p) for _, p in entries) if length is None else length,
        block_size=block_size, min_block_size=0,
    )
    out: list[BytesLike] = []
    for entry_id, payload in entries:
        out += writer.add(entry_id, payload)
    out += writer.finish()
    return b"".join(bytes(b) for b in out), writer


def test_golden_two_blocks() -> None:
    data, writer = stream(LEDGER, 160)
    assert data == BLOCK0 + BLOCK1
    assert [(b.first_entry_id, b.block_len) for b in writer.blocks] == [(0, 160), (1, 150)]
    assert writer.bytes_written == len(data) == 310


def test_golden_exact_last_block_no_padding() -> None:
    data, _ = stream([(0, b"x" * 12), (1, b"")], 152)
    assert data == header_bytes(152, 0) + entry_bytes(0, b"x" * 12) + header_bytes(140, 1) + \
        entry_bytes(1, b"")


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 400), min_size=1, max_size=60),
       block_size=st.integers(140, 700), first=st.integers(0, 1000))
def test_same_bytes_as_a_reference_packer(sizes: list[int], block_size: int, first: int) -> None:
    sizes = [min(s, block_size - 140) for s in sizes]
    entries = [(first + i, bytes([i % 251]) * s) for i, s in enumerate(sizes)]
    data, writer = stream(entries, block_size)
    blocks = reference_blocks(entries, block_size)
    assert data == b"".join(b for _, _, b in blocks)
    assert [(b.first_entry_id, b.entry_count, b.block_len) for b in writer.blocks] == [
        (first_id, count, len(b)) for first_id, count, b in blocks
    ]


def test_entry_larger_than_a_block_is_an_error() -> None:
    entries = [(0, b"a"), (1, bytes(61)), (2, b"b")]
    with pytest.raises(EntryTooLarge) as err:
        stream(entries, 200)
    assert (err.value.entry_id, err.value.payload_len) == (1, 61)


def test_length_that_does_not_add_up_is_refused() -> None:
    entries = [(0, b"abc"), (1, b"defg")]
    with pytest.raises(LedgerFormatError, match="more than the ledger's length"):
        stream(entries, 1000, length=5)
    with pytest.raises(LedgerFormatError, match="hold 7 bytes, the ledger's length is 8"):
        stream(entries, 1000, length=8)
    # A length too large by more than an entry: the last block is sized for
    # entries that never come.
    with pytest.raises(LedgerFormatError):
        stream(entries, 1000, length=100)


def test_ids_must_follow_and_stop_at_the_last() -> None:
    writer = BlockStreamWriter(last_entry_id=1, length=2, block_size=MIN_BLOCK_SIZE)
    writer.add(0, b"a")
    with pytest.raises(LedgerFormatError, match="got 2, expected 1"):
        writer.add(2, b"b")
    with pytest.raises(LedgerFormatError, match="never written"):
        writer.finish()
    writer.add(1, b"b")
    with pytest.raises(LedgerFormatError, match="past the ledger's last entry"):
        writer.add(2, b"")
    assert writer.finish() == []
    with pytest.raises(LedgerFormatError, match="out of range"):
        BlockStreamWriter(last_entry_id=0, length=0, block_size=1 << 20)  # below 5 MiB
