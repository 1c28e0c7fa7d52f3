"""PIP-17 data blocks: plan, encode and decode them. Pure: no IO.

A data object is a sequence of blocks, each one multipart part. A block is a
128-byte header (:class:`~tieredstore.ledger.format.DataBlockHeader`), then
entries ``[len int32][entry_id int64][payload]`` with consecutive ids, then
padding ``FE DC DE AD FE DC ...`` to the block size. An entry that does not fit
the rest of a block starts the next one. Every block but the last is exactly the
block size; the last is sized exactly, ``128 + sum(12 + len(payload))``, with no
padding. This is what Pulsar's ``BlockAwareSegmentInputStreamImpl`` writes with
the block sizes ``calculateBlockSize`` gives it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tieredstore.ledger.format import (
    DEFAULT_BLOCK_SIZE,
    ENTRY_HEADER_SIZE,
    HEADER_SIZE,
    INT32_MAX,
    INT64_MAX,
    MAX_BLOCK_SIZE,
    MIN_BLOCK_SIZE,
    MIN_POSSIBLE_BLOCK_SIZE,
    PADDING_PATTERN,
    BytesLike,
    DataBlockHeader,
    EntryTooLarge,
    LedgerFormatError,
    check_int,
    padding,
)

_ENTRY_HEADER = struct.Struct(">iq")
_PADDING_WORD = struct.unpack(">i", PADDING_PATTERN)[0]

# --- sizes and plans ---------------------------------------------------------


def exact_block_size(payload_sizes: Iterable[int]) -> int:
    """The size of a block holding entries of these payload sizes and no padding."""
    return HEADER_SIZE + sum(ENTRY_HEADER_SIZE + size for size in payload_sizes)


def next_block_size(max_block_size: int, remaining_entries: int, remaining_payload: int) -> int:
    """Pulsar's ``calculateBlockSize``: the size of the next block, known before
    writing it, from the count and payload bytes of the entries not yet written."""
    return min(
        max_block_size, HEADER_SIZE + remaining_entries * ENTRY_HEADER_SIZE + remaining_payload
    )


def check_block_size(block_size: int, min_block_size: int = MIN_BLOCK_SIZE) -> None:
    """Refuse a block size below ``min_block_size`` (5 MiB by default: blocks are
    multipart parts), below the 140 bytes one empty entry needs, or above 2 GiB."""
    low = max(min_block_size, MIN_POSSIBLE_BLOCK_SIZE)
    if not low <= block_size <= MAX_BLOCK_SIZE:
        raise LedgerFormatError(
            f"block size {block_size} is out of range [{low}, {MAX_BLOCK_SIZE}]"
        )


@dataclass(frozen=True, slots=True)
class BlockPlan:
    """Where a block's entries come from and how large it is, without the bytes."""

    first_entry_id: int
    entry_count: int
    block_len: int
    payload_bytes: int
    """Sum of the payload sizes (Pulsar's ``getBlockEntryBytesCount``)."""

    @property
    def end_entry_id(self) -> int:
        """One past the last entry id in the block."""
        return self.first_entry_id + self.entry_count


class _Packer:
    """Greedy packing shared by :func:`plan_blocks` and :func:`encode_blocks`."""

    __slots__ = ("block_size", "count", "first_id", "next_id", "payload")

    def __init__(self, block_size: int, first_entry_id: int | None) -> None:
        self.block_size = block_size
        self.next_id = first_entry_id
        self.first_id = 0
        self.count = 0
        self.payload = 0

    @property
    def used(self) -> int:
        return HEADER_SIZE + self.count * ENTRY_HEADER_SIZE + self.payload

    def add(self, entry_id: int, size: int) -> BlockPlan | None:
        """Put an entry in the current block; return the block it had to close
        first (full size, to be padded) if it did not fit."""
        if self.next_id is not None and entry_id != self.next_id:
            raise LedgerFormatError(
                f"entry ids must be consecutive: got {entry_id}, expected {self.next_id}"
            )
        check_int("entry id", entry_id, 0, INT64_MAX)
        if size < 0:
            raise LedgerFormatError(f"entry {entry_id}: negative payload size {size}")
        if size > INT32_MAX or ENTRY_HEADER_SIZE + size > self.block_size - HEADER_SIZE:
            raise EntryTooLarge(entry_id, size, self.block_size)
        self.next_id = entry_id + 1
        closed = None
        if self.count and self.used + ENTRY_HEADER_SIZE + size > self.block_size:
            closed = BlockPlan(self.first_id, self.count, self.block_size, self.payload)
            self.count = self.payload = 0
        if self.count == 0:
            self.first_id = entry_id
        self.count += 1
        self.payload += size
        return closed

    def last(self) -> BlockPlan | None:
        """The last block, sized exactly; None if there were no entries."""
        if not self.count:
            return None
        return BlockPlan(self.first_id, self.count, self.used, self.payload)


def plan_blocks(
    payload_sizes: Iterable[int],
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    first_entry_id: int = 0,
    min_block_size: int = MIN_BLOCK_SIZE,
) -> Iterator[BlockPlan]:
    """The blocks :func:`encode_blocks` makes for entries of these payload sizes,
    with consecutive ids from ``first_entry_id``."""
    check_block_size(block_size, min_block_size)
    packer = _Packer(block_size, first_entry_id)
    for entry_id, size in enumerate(payload_sizes, first_entry_id):
        closed = packer.add(entry_id, size)
        if closed is not None:
            yield closed
    last = packer.last()
    if last is not None:
        yield last


# --- encoding ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DataBlock:
    """One encoded block, as the buffers to write in order (no copy of payloads).

    ``chunks`` is the header, then for each entry its 12-byte header and its
    payload (the caller's own object), then the padding, if any. Join them once
    with :meth:`to_bytes`, or hand them to a writer that takes a list of buffers.
    """

    header: DataBlockHeader
    entry_count: int
    payload_bytes: int
    chunks: tuple[BytesLike, ...]

    @property
    def first_entry_id(self) -> int:
        return self.header.first_entry_id

    @property
    def end_entry_id(self) -> int:
        """One past the last entry id in the block."""
        return self.header.first_entry_id + self.entry_count

    @property
    def block_len(self) -> int:
        return self.header.block_len

    def to_bytes(self) -> bytes:
        return b"".join(self.chunks)


def _close_block(chunks: list[BytesLike], plan: BlockPlan) -> DataBlock:
    header = DataBlockHeader(block_len=plan.block_len, first_entry_id=plan.first_entry_id)
    chunks[0] = header.encode()
    used = HEADER_SIZE + plan.entry_count * ENTRY_HEADER_SIZE + plan.payload_bytes
    if plan.block_len > used:
        chunks.append(padding(plan.block_len - used))
    return DataBlock(header, plan.entry_count, plan.payload_bytes, tuple(chunks))


def encode_blocks(
    entries: Iterable[tuple[int, BytesLike]],
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    min_block_size: int = MIN_BLOCK_SIZE,
) -> Iterator[DataBlock]:
    """Pack ``(entry_id, payload)`` pairs, ids consecutive, into data blocks.

    Every block but the last is ``block_size`` bytes, padded; the last is sized
    exactly. Blocks are yielded as soon as they are complete, so at most one
    block's payloads are held. An entry that cannot fit an empty block raises
    :class:`~tieredstore.ledger.format.EntryTooLarge`. ``min_block_size`` is the
    smallest ``block_size`` accepted: 5 MiB for S3; tests may lower it.
    """
    check_block_size(block_size, min_block_size)
    packer = _Packer(block_size, None)
    chunks: list[BytesLike] = [b""]  # [0] becomes the header when the block closes
    for entry_id, data in entries:
        size = memoryview(data).nbytes
        closed = packer.add(entry_id, size)
        if closed is not None:
            yield _close_block(chunks, closed)
            chunks = [b""]
        chunks.append(_ENTRY_HEADER.pack(size, entry_id))
        chunks.append(data)
    last = packer.last()
    if last is not None:
        yield _close_block(chunks, last)


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


def decode_block(data: BytesLike, *, partial: bool = False) -> tuple[DataBlockHeader, BlockScan]:
    """Decode a block from its start: header, entries, padding.

    With ``partial=False`` ``data`` must be the whole block, ``block_len``
    bytes. With ``partial=True`` it may be any prefix of at least the header;
    decoding stops before an entry the prefix cuts off (continue with
    :func:`decode_entries` from ``next_offset``). Raises
    :class:`~tieredstore.ledger.format.LedgerFormatError` on a bad header, a
    truncated block, an entry running past the block end, an entry id out of
    sequence, or padding that is not ``FE DC DE AD ...``.
    """
    view = memoryview(data).cast("B")
    header = DataBlockHeader.decode(view)
    view = view[HEADER_SIZE:]
    scan = decode_entries(
        view,
        offset=HEADER_SIZE,
        block_len=header.block_len,
        expected_entry_id=header.first_entry_id,
        partial=partial,
    )
    return header, scan


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
