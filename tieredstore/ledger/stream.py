"""PIP-17 data blocks written as a stream. Pure: no IO.

The PIP-17 encoders: :class:`BlockPacker`, what offloads write (unpadded
blocks of about the read size), and :class:`BlockStreamWriter`, Pulsar's own
fixed-size padded blocks (for tests against Pulsar's layout).

:class:`BlockStreamWriter`: An offload reads its ledger in batches and must not
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

from tieredstore.checksum import crc32c
from tieredstore.ledger.block import BlockPlan, check_block_size, next_block_size
from tieredstore.ledger.format import (
    ENTRY_HEADER_SIZE,
    HEADER_SIZE,
    INT32_MAX,
    MIN_BLOCK_SIZE,
    MIN_POSSIBLE_BLOCK_SIZE,
    BytesLike,
    DataBlockHeader,
    EntryTooLarge,
    LedgerFormatError,
    padding,
)

_ENTRY_HEADER = struct.Struct(">iq")


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
