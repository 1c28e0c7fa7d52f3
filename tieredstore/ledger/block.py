"""PIP-17 data blocks: their sizes and how to decode their entries. Pure: no IO.

A data object is a sequence of blocks, each one multipart part. A block is a
128-byte header (:class:`~tieredstore.ledger.format.DataBlockHeader`), then
entries ``[len int32][entry_id int64][payload]`` with consecutive ids, then
padding ``FE DC DE AD FE DC ...`` to the block size. An entry that does not fit
the rest of a block starts the next one. Every block but the last is exactly the
block size; the last is sized exactly, ``128 + sum(12 + len(payload))``, with no
padding. This is what Pulsar's ``BlockAwareSegmentInputStreamImpl`` writes with
the block sizes ``calculateBlockSize`` gives it; offloads write unpadded
blocks (:class:`~tieredstore.ledger.stream.BlockPacker`), and read both.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tieredstore.ledger.format import (
    ENTRY_HEADER_SIZE,
    HEADER_SIZE,
    PADDING_PATTERN,
    BytesLike,
    LedgerFormatError,
    padding,
)

_ENTRY_HEADER = struct.Struct(">iq")
_PADDING_WORD = struct.unpack(">i", PADDING_PATTERN)[0]

# --- sizes -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BlockPlan:
    """Where a block's entries come from and how large it is, without the bytes."""

    first_entry_id: int
    entry_count: int
    block_len: int
    payload_bytes: int
    """Sum of the payload sizes (Pulsar's ``getBlockEntryBytesCount``)."""
    crc: int | None = None
    """CRC32C of the whole block as stored (header included), where the writer
    keeps one (our unpadded blocks: the index's checksum trailer)."""

    @property
    def end_entry_id(self) -> int:
        """One past the last entry id in the block."""
        return self.first_entry_id + self.entry_count


# --- decoding ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BlockEntry:
    entry_id: int
    payload: memoryview
    """A view into the decoded buffer (no copy); ``bytes(payload)`` to keep it alone."""
    offset: int
    """Offset of the entry's length field from the start of its block."""


@dataclass(frozen=True, slots=True)
class BlockScan:
    """The entries found in a block, or in a range of it."""

    entries: list[BlockEntry]
    next_offset: int
    """Block offset of the first byte not decoded: where the next entry starts if
    ``at_end`` is false; the start of the padding (or the block end) if true."""
    at_end: bool
    """True when no entry follows in this block: padding or the block end reached."""

    @property
    def next_entry_id(self) -> int | None:
        return self.entries[-1].entry_id + 1 if self.entries else None


def decode_entries(
    data: BytesLike,
    *,
    offset: int,
    block_len: int,
    expected_entry_id: int | None = None,
    partial: bool = False,
) -> BlockScan:
    """Decode entries from ``data``, which starts at block offset ``offset`` (an
    entry start, e.g. ``HEADER_SIZE`` or a ``next_offset``) of a block of
    ``block_len`` bytes. With ``partial=False`` ``data`` must reach exactly to
    the block end; with ``partial=True`` it may stop anywhere before it.
    ``expected_entry_id``, if given, is the id the first entry must have.
    """
    view = memoryview(data).cast("B")
    if not HEADER_SIZE <= offset <= block_len:
        raise LedgerFormatError(f"entry offset {offset} is outside the block [128, {block_len}]")
    rest = block_len - offset
    if len(view) > rest or (not partial and len(view) != rest):
        raise LedgerFormatError(
            f"block of {block_len} bytes: {len(view)} bytes from offset {offset} "
            + ("run past its end" if len(view) > rest else f"are truncated, expected {rest}")
        )
    entries: list[BlockEntry] = []
    expected = expected_entry_id
    unpack = _ENTRY_HEADER.unpack_from
    pos = 0  # in view; the block offset is offset + pos
    end = len(view)
    while True:
        left = rest - pos  # bytes to the block end
        if left == 0:
            return BlockScan(entries, offset + pos, True)
        have = end - pos
        entry_id = -1
        if left < ENTRY_HEADER_SIZE:
            length = _PADDING_WORD  # no entry fits in what is left: it must be padding
        elif have >= ENTRY_HEADER_SIZE:
            length, entry_id = unpack(view, pos)
        elif have >= 4:
            (length,) = struct.unpack_from(">i", view, pos)
        else:
            return BlockScan(entries, offset + pos, False)  # the prefix ends here
        if length < 0:  # 0xFEDCDEAD: padding, as Pulsar's reader tells it
            _check_padding(view[pos:end], offset + pos)
            return BlockScan(entries, offset + pos, True)
        if ENTRY_HEADER_SIZE + length > left:
            raise LedgerFormatError(
                f"entry at block offset {offset + pos} has length {length}, but only "
                f"{left - ENTRY_HEADER_SIZE} bytes remain before the block end at {block_len}"
            )
        if have < ENTRY_HEADER_SIZE + length:
            return BlockScan(entries, offset + pos, False)  # the prefix cuts this entry
        if expected is not None and entry_id != expected:
            raise LedgerFormatError(
                f"entry at block offset {offset + pos} has id {entry_id}, expected {expected}"
            )
        start = pos + ENTRY_HEADER_SIZE
        entries.append(BlockEntry(entry_id, view[start : start + length], offset + pos))
        expected = entry_id + 1
        pos = start + length


def _check_padding(data: memoryview, block_offset: int) -> None:
    if data != padding(len(data)):
        raise LedgerFormatError(
            f"bytes at block offset {block_offset} are neither an entry nor the padding "
            f"FE DC DE AD...: {bytes(data[:16]).hex(' ')}"
        )
