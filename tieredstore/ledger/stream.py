"""PIP-17 data blocks written as a stream: :class:`BlockPacker`, what offloads
write (unpadded blocks of about the read size). Pure: no IO.
"""

from __future__ import annotations

import struct

from tieredstore.checksum import crc32c
from tieredstore.ledger.block import BlockPlan
from tieredstore.ledger.format import (
    ENTRY_HEADER_SIZE,
    HEADER_SIZE,
    INT32_MAX,
    MIN_POSSIBLE_BLOCK_SIZE,
    BytesLike,
    DataBlockHeader,
    EntryTooLarge,
    LedgerFormatError,
)

_ENTRY_HEADER = struct.Struct(">iq")


class BlockPacker:
    """Packs the entries of a closed ledger, in order, into unpadded PIP-17 blocks.

    A block holds the entries that fit in ``block_size`` bytes and ends
    exactly at its last entry (``block_len`` = 128 + the sum of ``12 + len``):
    a block is built whole before its header is written, so it needs no
    padding. An entry larger than ``block_size - 140`` gets a block of its
    own, of exactly its size. Pulsar's reader reads the next block's magic (a
    negative length) as "new block" and seeks through the index, so it reads
    these blocks as it reads its own. ``add`` returns the block the entry
    closed, if any; ``finish`` the last one; ``blocks`` describes them all.
    """

    def __init__(self, *, block_size: int, first_entry_id: int = 0) -> None:
        if not MIN_POSSIBLE_BLOCK_SIZE <= block_size <= INT32_MAX:
            raise LedgerFormatError(
                f"block size {block_size} is out of range [{MIN_POSSIBLE_BLOCK_SIZE}, "
                f"{INT32_MAX}]")
        self.block_size = block_size
        self.next_entry_id = first_entry_id
        self.blocks: list[BlockPlan] = []
        self.bytes_written = 0
        self._pieces: list[BytesLike] = []
        self._first = first_entry_id
        self._used = HEADER_SIZE
        self._payload = 0

    def add(self, entry_id: int, payload: BytesLike) -> bytes | None:
        """Take one entry; the block it closed (the one before it), if any."""
        if entry_id != self.next_entry_id:
            raise LedgerFormatError(
                f"entry ids must be consecutive: got {entry_id}, expected {self.next_entry_id}"
            )
        size = memoryview(payload).nbytes
        if size > INT32_MAX - HEADER_SIZE - ENTRY_HEADER_SIZE:
            raise EntryTooLarge(entry_id, size, INT32_MAX)
        need = ENTRY_HEADER_SIZE + size
        closed = self._close() if self._pieces and self._used + need > self.block_size else None
        if not self._pieces:
            self._first = entry_id
        self._pieces += (_ENTRY_HEADER.pack(size, entry_id), payload)
        self._used += need
        self._payload += size
        self.next_entry_id += 1
        return closed

    def finish(self) -> bytes | None:
        """The last block, if any entry is left in hand."""
        return self._close() if self._pieces else None

    def _close(self) -> bytes:
        count = len(self._pieces) // 2
        block = b"".join([DataBlockHeader(block_len=self._used,
                                          first_entry_id=self._first).encode(), *self._pieces])
        self.blocks.append(BlockPlan(self._first, count, self._used, self._payload,
                                     crc32c(block)))
        self.bytes_written += len(block)
        self._pieces = []
        self._used = HEADER_SIZE
        self._payload = 0
        return block
