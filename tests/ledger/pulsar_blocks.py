"""Pulsar's own PIP-17 encoder, for tests against Pulsar's layout: fixed-size
padded blocks, as ``BlockAwareSegmentInputStreamImpl`` writes them. The
library's offloads write unpadded blocks (:class:`~tieredstore.ledger.stream.BlockPacker`);
its readers read both.

An offload reads its ledger in batches and must not
hold a 64 MiB block, so :class:`BlockStreamWriter` does what Pulsar's
``BlockAwareSegmentInputStreamImpl`` does: it knows each block's size before
the block's first byte, from the ledger's length and last entry id
(``calculateBlockSize``: the block size, or the exact size of what is left),
writes the 128-byte header, then entries as they come, and pads a block when
the next entry does not fit. It holds at most the entry in hand. (Tests check
its bytes against hand-built golden blocks and a reference packer.)

The ledger's ``length`` must be the sum of its payload sizes: a ledger whose
entries do not add up to it is refused with a
:class:`~tieredstore.ledger.format.LedgerFormatError`, never written with a
wrong last block. An entry that cannot fit an empty block raises
:class:`~tieredstore.ledger.format.EntryTooLarge`.
"""

from __future__ import annotations

import struct

from tieredstore.ledger.block import BlockPlan
from tieredstore.ledger.format import (
    ENTRY_HEADER_SIZE,
    HEADER_SIZE,
    INT32_MAX,
    MAX_BLOCK_SIZE,
    MIN_BLOCK_SIZE,
    MIN_POSSIBLE_BLOCK_SIZE,
    BytesLike,
    DataBlockHeader,
    EntryTooLarge,
    LedgerFormatError,
    padding,
)

_ENTRY_HEADER = struct.Struct(">iq")


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


class BlockStreamWriter:
    """Turns the entries of a closed ledger, in order, into PIP-17 data bytes.

    ``add`` and ``finish`` return the buffers to append to the data object;
    ``blocks`` describes the blocks written so far (for the index).
    """

    def __init__(
        self,
        *,
        last_entry_id: int,
        length: int,
        block_size: int,
        first_entry_id: int = 0,
        min_block_size: int = MIN_BLOCK_SIZE,
    ) -> None:
        check_block_size(block_size, min_block_size)
        if last_entry_id < first_entry_id:
            raise LedgerFormatError(
                f"no entries to write: last entry id {last_entry_id} < first {first_entry_id}"
            )
        if length < 0:
            raise LedgerFormatError(f"negative ledger length {length}")
        self.block_size = block_size
        self.last_entry_id = last_entry_id
        self.length = length
        self.next_entry_id = first_entry_id
        self.payload_written = 0
        self.bytes_written = 0
        self.blocks: list[BlockPlan] = []
        # The block being written: its size, first entry, count, bytes used.
        self._block_len = 0
        self._first = 0
        self._count = 0
        self._payload = 0
        self._used = 0

    @property
    def done(self) -> bool:
        return self.next_entry_id > self.last_entry_id

    def add(self, entry_id: int, payload: BytesLike) -> list[BytesLike]:
        """Write one entry; the buffers to append (the payload is not copied)."""
        if entry_id != self.next_entry_id:
            raise LedgerFormatError(
                f"entry ids must be consecutive: got {entry_id}, expected {self.next_entry_id}"
            )
        if self.done:
            raise LedgerFormatError(
                f"entry {entry_id} is past the ledger's last entry {self.last_entry_id}"
            )
        size = memoryview(payload).nbytes
        if size > INT32_MAX or HEADER_SIZE + ENTRY_HEADER_SIZE + size > self.block_size:
            raise EntryTooLarge(entry_id, size, self.block_size)
        if self.payload_written + size > self.length:
            raise LedgerFormatError(
                f"entry {entry_id}: the entries hold more than the ledger's length "
                f"{self.length} ({self.payload_written} + {size} bytes)"
            )
        out: list[BytesLike] = []
        need = ENTRY_HEADER_SIZE + size
        if self._block_len and self._used + need > self._block_len:
            out += self._close_block()
        if not self._block_len:
            out.append(self._open_block(entry_id))
            if self._used + need > self._block_len:  # the length did not add up
                raise LedgerFormatError(
                    f"entry {entry_id} ({size} bytes) does not fit the last block of "
                    f"{self._block_len} bytes: the entries do not add up to the ledger's "
                    f"length {self.length}"
                )
        out.append(_ENTRY_HEADER.pack(size, entry_id))
        out.append(payload)
        self._count += 1
        self._payload += size
        self._used += need
        self.payload_written += size
        self.next_entry_id += 1
        self.bytes_written += sum(memoryview(b).nbytes for b in out)
        return out

    def finish(self) -> list[BytesLike]:
        """After the last entry: close the last block (exactly full: nothing to add)."""
        if not self.done:
            raise LedgerFormatError(
                f"entries {self.next_entry_id}..{self.last_entry_id} were never written"
            )
        if self.payload_written != self.length:
            raise LedgerFormatError(
                f"the entries hold {self.payload_written} bytes, the ledger's length is "
                f"{self.length}"
            )
        out = self._close_block() if self._block_len else []
        self.bytes_written += sum(len(b) for b in out)
        return out

    def _open_block(self, entry_id: int) -> bytes:
        remaining_entries = self.last_entry_id - entry_id + 1
        remaining_payload = self.length - self.payload_written
        self._block_len = next_block_size(self.block_size, remaining_entries, remaining_payload)
        self._first = entry_id
        self._count = self._payload = 0
        self._used = HEADER_SIZE
        return DataBlockHeader(block_len=self._block_len, first_entry_id=entry_id).encode()

    def _close_block(self) -> list[BytesLike]:
        pad = self._block_len - self._used
        self.blocks.append(BlockPlan(self._first, self._count, self._block_len, self._payload))
        self._block_len = 0
        return [padding(pad)] if pad else []
