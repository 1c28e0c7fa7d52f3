"""LegacyReadHandle: an offloaded ledger of the old layout (one segment of the
segment engine, docs/format.md *The old layout*), read back as the original.

New offloads are never written so (:mod:`tieredstore.ledger.offloaded` reads
those); this keeps attempts offloaded before readable. Opening costs three
requests: a GET of the index object (PIP-17 bytes, read
once), a HEAD of the data object and a ranged GET of its tail (our unit
table, which gives the segment its layout). No listing, no writes.

A read finds the block of its first entry by binary search in the index,
then starts from the nearest entry whose offset it has seen (an
:class:`~tieredstore.ledger.offsets.OffsetCache`) rather than the block's
start. It decodes a window of up to ``scan_bytes`` (1 MiB, as Pulsar reads),
never past the unit it starts in unless an entry runs on, through the
segment's reader: with a :class:`~tieredstore.fetcher.Fetcher`, a unit is
fetched by one GET, checked against its CRC32C, cached, and read ahead when
reads run forward. So a ledger read front to back costs about one GET per
unit, whatever the entry sizes. The entries of the last window are kept, so
a reader going entry by entry decodes each window once.
"""

from __future__ import annotations

from collections import OrderedDict

from tieredstore.errors import ObjectNotFound
from tieredstore.ledger.block import BlockEntry, BlockScan, decode_entries
from tieredstore.ledger.errors import CorruptLedger, OffloadNotFound
from tieredstore.ledger.format import ENTRY_HEADER_SIZE, LedgerFormatError
from tieredstore.ledger.handle import LedgerEntry
from tieredstore.ledger.index import IndexEntry, OffloadIndex
from tieredstore.ledger.location import OffloadLocation
from tieredstore.ledger.offloaded import IndexedReadHandle
from tieredstore.ledger.offsets import OffsetCache
from tieredstore.ledger.user_metadata import check_format_version
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment.chunked import ChunkedSegment, SegmentOptions
from tieredstore.segment.layout import SegmentLayout
from tieredstore.segment.listing import SegmentState
from tieredstore.segment.reader import SegmentReader
from tieredstore.segment.recovery import read_merged_units
from tieredstore.sizes import MiB

DEFAULT_SCAN_BYTES = 1 * MiB


class LegacyReadHandle(IndexedReadHandle):
    """Reads one old-layout offloaded ledger. Open with :meth:`open`."""

    def __init__(
        self,
        location: OffloadLocation,
        index: OffloadIndex,
        segment: ChunkedSegment,
        *,
        scan_bytes: int = DEFAULT_SCAN_BYTES,
    ) -> None:
        super().__init__(location, index)
        self.segment = segment
        self.scan_bytes = max(ENTRY_HEADER_SIZE, scan_bytes)
        self.offsets = OffsetCache()
        self._recent: OrderedDict[int, LedgerEntry] = OrderedDict()
        self.windows_decoded = 0

    @classmethod
    async def open(
        cls,
        store: ObjectStore,
        location: OffloadLocation,
        *,
        reader: SegmentReader | None = None,
        scan_bytes: int = DEFAULT_SCAN_BYTES,
    ) -> LegacyReadHandle:
        """Read the index and the data object's unit table; refuse an
        incomplete offload with :class:`OffloadNotFound`."""
        ledger_id = location.ledger_id
        try:
            got = await store.get_object(location.legacy_index_key)
            info = await store.head(location.legacy_data_key)
        except ObjectNotFound:
            raise OffloadNotFound(
                f"no complete offload {location} (its index or data object is missing)",
                ledger_id=ledger_id,
            ) from None
        check_format_version(got.info.metadata, location.legacy_index_key, ledger_id=ledger_id)
        check_format_version(info.metadata, location.legacy_data_key, ledger_id=ledger_id)
        try:
            index = OffloadIndex.decode(got.data)
        except LedgerFormatError as exc:
            raise CorruptLedger(f"index {location.legacy_index_key!r}: {exc}",
                                ledger_id=ledger_id) from None
        path = location.legacy_path
        layout = SegmentLayout(await read_merged_units(store, path, info.size))
        if layout.size != index.data_object_len:
            raise CorruptLedger(
                f"the data object holds {layout.size} bytes, its index says "
                f"{index.data_object_len}",
                ledger_id=ledger_id,
            )
        segment = ChunkedSegment(store, path, options=SegmentOptions(merge_on_seal=False),
                                 reader=reader, layout=layout, state=SegmentState.SEALED)
        return cls(location, index, segment, scan_bytes=scan_bytes)

    # --- reading ----------------------------------------------------------------------

    async def _read(self, first: int, last: int) -> list[LedgerEntry]:
        out: list[LedgerEntry] = []
        wanted = first
        while wanted <= last:
            entry = self._recent.get(wanted)
            if entry is not None:
                out.append(entry)
                wanted += 1
                continue
            await self._decode_window(wanted)
            if wanted not in self._recent:
                raise CorruptLedger(
                    f"entry {wanted} is not where the index says (block of "
                    f"{self.index.lookup(wanted)})",
                    ledger_id=self.ledger_id,
                )
        return out

    async def _decode_window(self, entry_id: int) -> None:
        """Decode a window of entries that starts at or before ``entry_id`` and
        reaches it; they replace the recent entries."""
        block = self.index.lookup(entry_id)
        block_len = self.index.block_len(block)
        block_end = block.offset + block_len
        known = self.offsets.floor(entry_id)
        if known is not None and known[0] >= block.first_entry_id:
            next_id, pos = known
        else:
            next_id, pos = block.first_entry_id, block.data_offset
        recent: OrderedDict[int, LedgerEntry] = OrderedDict()
        while True:
            entries, next_id, pos, at_end = await self._window(block, block_len, next_id, pos,
                                                                block_end)
            for e in entries:
                self.offsets.add(e.entry_id, block.offset + e.offset)
                if e.entry_id >= entry_id:
                    recent[e.entry_id] = LedgerEntry(e.entry_id, bytes(e.payload))
            if recent or at_end:
                break
        self._recent = recent

    async def _window(
        self, block: IndexEntry, block_len: int, next_id: int, pos: int, block_end: int
    ) -> tuple[list[BlockEntry], int, int, bool]:
        """Entries from ``pos`` (the start of entry ``next_id``) in one window;
        then the next id, its position, and whether the block ended."""
        if pos >= block_end:
            return [], next_id, pos, True
        unit_end = self.segment.layout.unit_at(pos).end
        stop = min(block_end, pos + self.scan_bytes)
        if unit_end - pos >= ENTRY_HEADER_SIZE:
            stop = min(stop, unit_end)
        data = await self.segment.read0(pos, stop - pos)
        self.windows_decoded += 1
        scan = self._decode(data, block, block_len, pos, next_id)
        if not scan.entries and not scan.at_end and len(data) >= 4:
            # The entry runs past the window: read exactly it (its units load
            # once, through the reader, like any others).
            length = int.from_bytes(data[:4], "big", signed=True)
            stop = min(block_end, pos + ENTRY_HEADER_SIZE + max(0, length))
            data = await self.segment.read0(pos, stop - pos)
            scan = self._decode(data, block, block_len, pos, next_id)
        if not scan.entries and not scan.at_end:
            raise CorruptLedger(
                f"no entry can be decoded at data offset {pos} (block at {block.offset})",
                ledger_id=self.ledger_id,
            )
        if scan.entries:
            next_id = scan.entries[-1].entry_id + 1
        return scan.entries, next_id, block.offset + scan.next_offset, scan.at_end

    def _decode(self, data: bytes, block: IndexEntry, block_len: int, pos: int, next_id: int
                ) -> BlockScan:
        try:
            return decode_entries(data, offset=pos - block.offset, block_len=block_len,
                                  expected_entry_id=next_id, partial=True)
        except LedgerFormatError as exc:
            raise CorruptLedger(f"data object at offset {pos}: {exc}",
                                ledger_id=self.ledger_id) from None

    async def close(self) -> None:
        # docstring inherited
        if not self._closed:
            self._closed = True
            self._recent.clear()
            self.segment.reader.forget(self.segment.path)

