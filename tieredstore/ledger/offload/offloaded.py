"""OffloadedReadHandle: an offloaded ledger, read back as if it were the original.

Opening is one GET, of the index object (the handle keeps it; a managed
ledger keeps the handle). A read finds the block of each wanted entry by
binary search in the index and fetches whole blocks by ranged GET of the data
object: the block of the first entry wanted and the blocks after it the read
reaches, adjacent, up to ``max_get_bytes`` (8 MiB) a GET, at least one block.
Blocks are about 1 MiB (:class:`~tieredstore.ledger.stream.BlockPacker`), so
one entry costs one ranged GET of at most about 1 MiB; the blocks of the last
GET are kept, so a reader going entry by entry fetches each block once.
Every block is checked against the index (its header's length and first
entry id, and its CRC32C where the index has our checksum trailer) and decoded
with its entry ids in order; the data object's size and format version are
checked on its first GET. A GET (of the index or of blocks) that fails a check
is made again, as every checked read of the store is
(:func:`~tieredstore.objectstore.reads.read_again_if`: a torn or flipped read
in transit does not repeat); damage that repeats is :class:`CorruptLedger`.
No listing, no HEAD, no writes.
"""

from __future__ import annotations

import abc

from tieredstore.checksum import crc32c
from tieredstore.errors import ObjectNotFound
from tieredstore.ledger.block import decode_entries
from tieredstore.ledger.errors import CorruptLedger, LedgerClosed, OffloadNotFound
from tieredstore.ledger.format import HEADER_SIZE, DataBlockHeader, LedgerFormatError
from tieredstore.ledger.handle import LedgerEntry, LedgerMetadata, ReadHandle, check_range
from tieredstore.ledger.index import IndexEntry, OffloadIndex
from tieredstore.ledger.offload.location import OffloadLocation
from tieredstore.ledger.offload.user_metadata import check_format_version
from tieredstore.objectstore.base import ByteRange, ObjectStore
from tieredstore.objectstore.reads import read_again_if
from tieredstore.sizes import MiB

MAX_GET_BYTES = 8 * MiB


async def read_index(store: ObjectStore, location: OffloadLocation
                     ) -> tuple[OffloadIndex, dict[str, str]]:
    """The attempt's index object, decoded, and its user metadata; raises
    :class:`OffloadNotFound` if there is none (an incomplete attempt)."""
    return await read_again_if(CorruptLedger, lambda: _read_index_once(store, location))


async def _read_index_once(store: ObjectStore, location: OffloadLocation
                           ) -> tuple[OffloadIndex, dict[str, str]]:
    ledger_id = location.ledger_id
    try:
        got = await store.get_object(location.index_key)
    except ObjectNotFound:
        raise OffloadNotFound(f"no complete offload {location} (no index object "
                              f"{location.index_key!r})", ledger_id=ledger_id) from None
    check_format_version(got.info.metadata, location.index_key, ledger_id=ledger_id)
    try:
        return OffloadIndex.decode(got.data), dict(got.info.metadata)
    except LedgerFormatError as exc:
        raise CorruptLedger(f"index {location.index_key!r}: {exc}", ledger_id=ledger_id) from None


class IndexedReadHandle(ReadHandle):
    """What the handles of an offloaded ledger share: the attempt, its index
    (the original's metadata), the checks every read makes; ``_read`` reads."""

    def __init__(self, location: OffloadLocation, index: OffloadIndex) -> None:
        self.location = location
        self.index = index
        self._metadata = LedgerMetadata.from_bytes(index.ledger_metadata)
        self._closed = False

    @property
    def ledger_id(self) -> int:
        return self.location.ledger_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        # docstring inherited
        if self._closed:
            raise LedgerClosed("the handle is closed", ledger_id=self.ledger_id)
        check_range(self.ledger_id, first, last, self.last_add_confirmed)
        return await self._read(first, last)

    @abc.abstractmethod
    async def _read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last``, checked to lie in the ledger."""


class OffloadedReadHandle(IndexedReadHandle):
    """Reads one offloaded ledger at PIP-17's names. Open with :meth:`open`."""

    def __init__(self, store: ObjectStore, location: OffloadLocation, index: OffloadIndex, *,
                 max_get_bytes: int = MAX_GET_BYTES) -> None:
        super().__init__(location, index)
        self.store = store
        self.max_get_bytes = max_get_bytes
        self._blocks: dict[int, list[LedgerEntry]] = {}  # the last GET's, by part id
        self._checked = False
        self.gets = 0

    @classmethod
    async def open(cls, store: ObjectStore, location: OffloadLocation, *,
                   max_get_bytes: int = MAX_GET_BYTES) -> OffloadedReadHandle:
        """Read the index; refuse an incomplete offload with :class:`OffloadNotFound`."""
        index, _ = await read_index(store, location)
        return cls(store, location, index, max_get_bytes=max_get_bytes)

    async def _read(self, first: int, last: int) -> list[LedgerEntry]:
        out: list[LedgerEntry] = []
        while (at := first + len(out)) <= last:
            block = self.index.lookup(at)
            entries = self._blocks.get(block.part_id) or await self._fetch(block, last)
            skip = at - block.first_entry_id
            if not 0 <= skip < len(entries):
                raise CorruptLedger(f"entry {at} is not in the block at data offset "
                                    f"{block.offset}", ledger_id=self.ledger_id)
            out += entries[skip: skip + last - at + 1]
        return out

    async def _fetch(self, block: IndexEntry, last: int) -> list[LedgerEntry]:
        """GET ``block`` and the adjacent blocks up to the one holding ``last``
        (within ``max_get_bytes``); keep them; the entries of ``block``."""
        entries = self.index.entries
        run = [block]
        size = self.index.block_len(block)
        for nxt in entries[block.part_id:]:
            more = self.index.block_len(nxt)
            if nxt.first_entry_id > last or size + more > self.max_get_bytes:
                break
            run.append(nxt)
            size += more
        return await read_again_if(CorruptLedger, lambda: self._fetch_run(block, run, size))

    async def _fetch_run(self, block: IndexEntry, run: list[IndexEntry],
                         size: int) -> list[LedgerEntry]:
        """One ranged GET of the blocks of ``run`` (``size`` bytes from ``block``),
        checked and decoded, kept."""
        key = self.location.data_key
        try:
            got = await self.store.get_object(key, ByteRange(block.offset, size))
        except ObjectNotFound:
            raise OffloadNotFound(f"the data object {key!r} of offload {self.location} is "
                                  "gone", ledger_id=self.ledger_id) from None
        self.gets += 1
        if not self._checked:
            check_format_version(got.info.metadata, key, ledger_id=self.ledger_id)
            if got.info.size != self.index.data_object_len:
                raise CorruptLedger(f"the data object holds {got.info.size} bytes, its index "
                                    f"says {self.index.data_object_len}", ledger_id=self.ledger_id)
            self._checked = True
        if len(got.data) != size:
            raise CorruptLedger(f"{key!r}: {len(got.data)} bytes at {block.offset}, expected "
                                f"{size}", ledger_id=self.ledger_id)
        view = memoryview(got.data)
        decoded = {}
        for one in run:
            start = one.offset - block.offset
            end = start + self.index.block_len(one)
            decoded[one.part_id] = self._decode(one, view[start:end])
        self._blocks = decoded  # only blocks that passed every check are kept
        return decoded[block.part_id]

    def _decode(self, block: IndexEntry, data: memoryview) -> list[LedgerEntry]:
        try:
            crc = self.index.block_crc(block)
            if crc is not None and crc32c(data) != crc:
                raise LedgerFormatError("it fails its CRC32C (changed in transit or at rest)")
            header = DataBlockHeader.decode(data)
            if (header.block_len, header.first_entry_id) != (len(data), block.first_entry_id):
                raise LedgerFormatError(
                    f"its header says {header.block_len} bytes from entry "
                    f"{header.first_entry_id}, the index {len(data)} from {block.first_entry_id}")
            scan = decode_entries(data[HEADER_SIZE:], offset=HEADER_SIZE, block_len=len(data),
                                  expected_entry_id=block.first_entry_id)
        except LedgerFormatError as exc:
            raise CorruptLedger(f"block at data offset {block.offset}: {exc}",
                                ledger_id=self.ledger_id) from None
        return [LedgerEntry(e.entry_id, bytes(e.payload)) for e in scan.entries]

    async def close(self) -> None:
        # docstring inherited
        self._closed = True
        self._blocks = {}
