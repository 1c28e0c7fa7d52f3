"""Consume-queue units and plain records checked as numpy arrays, for a scan in columns.

The same bytes and the same checks as :func:`~tieredstore.store.formats.record.decode_units`
and :func:`~tieredstore.store.formats.record.plain_run`, made over a whole block of
units or run of records at once instead of one Python step per row:

- :func:`decode_unit_block`: every unit's fields, and its CRC32C computed for
  all units together (a CRC over a fixed length is affine in the bytes: the
  XOR of one table entry per byte position, :func:`_unit_crcs`);
- :func:`plain_run_block`: the heads of records laid end to end, read as one
  array and compared with their units, each record's CRC32C by the C
  function, one call per record (its body is most of its bytes).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any, overload

import numpy as np

from tieredstore.checksum import crc32c
from tieredstore.store.formats.record import (
    HEAD_SIZE,
    MAGIC,
    NO_TAGS,
    PLAIN_BODY_AT,
    UNIT_SIZE,
    CqUnit,
    RecordError,
)

_UNIT_DTYPE = np.dtype([("position", ">u8"), ("size", ">u4"), ("tags_hash", ">i8"),
                        ("store_timestamp", ">i8"), ("crc", ">u4")])
_UNIT_BODY = UNIT_SIZE - 4  # the bytes a unit's CRC32C covers
_PLAIN_DTYPE = np.dtype([("total", ">u4"), ("magic", ">u4"), ("crc", ">u4"), ("offset", ">u8"),
                         ("store_timestamp", ">i8"), ("flags", ">u4"), ("tags", ">u2"),
                         ("keys", ">u2"), ("properties", ">u2"), ("body", ">u4")])
BODY_AT = PLAIN_BODY_AT  # where a plain record's body begins
assert _UNIT_DTYPE.itemsize == UNIT_SIZE and _PLAIN_DTYPE.itemsize == BODY_AT

Int64s = Any  # a numpy array of int64 (numpy's own types are not checked here)


class UnitBlock(Sequence[CqUnit]):
    """Units as four int64 arrays; a sequence of :class:`CqUnit` too (each
    made when asked for), so a slow path written for lists reads it as one."""

    __slots__ = ("_ends", "position", "size", "store_timestamp", "tags_hash")

    def __init__(self, position: Int64s, size: Int64s, tags_hash: Int64s,
                 store_timestamp: Int64s) -> None:
        self.position = position
        self.size = size
        self.tags_hash = tags_hash
        self.store_timestamp = store_timestamp
        self._ends: Int64s | None = None

    @property
    def ends(self) -> Int64s:
        """Where each unit's record ends (made once: a scan asks for every run)."""
        if self._ends is None:
            self._ends = self.position + self.size
        return self._ends

    def __len__(self) -> int:
        return len(self.position)

    @overload
    def __getitem__(self, index: int) -> CqUnit: ...
    @overload
    def __getitem__(self, index: slice) -> UnitBlock: ...

    def __getitem__(self, index: int | slice) -> CqUnit | UnitBlock:
        if isinstance(index, slice):
            return UnitBlock(self.position[index], self.size[index], self.tags_hash[index],
                             self.store_timestamp[index])
        return CqUnit(int(self.position[index]), int(self.size[index]),
                      int(self.tags_hash[index]), int(self.store_timestamp[index]))

    def __iter__(self) -> Iterator[CqUnit]:
        return map(CqUnit, self.position.tolist(), self.size.tolist(), self.tags_hash.tolist(),
                   self.store_timestamp.tolist())

    def take(self, keep: Sequence[int]) -> UnitBlock:
        """The units at indexes ``keep``."""
        at = np.asarray(keep, dtype=np.int64)
        return UnitBlock(self.position[at], self.size[at], self.tags_hash[at],
                         self.store_timestamp[at])

    def run_end(self, i: int, limit: int, budget: int) -> tuple[int, int]:
        """The last index ``j`` of the run from unit ``i``, and its bytes: the
        units after ``i`` each starting where the one before ends and ending by
        ``limit``, added while the run is below ``budget`` bytes. The units
        are in order (each at or after the end of the one before)."""
        position, ends = self.position, self.ends  # ends ascend, as the units are in order
        first = int(position[i])
        # The last unit by the limit, and the first at the budget: no further.
        last = min(int(np.searchsorted(ends, limit, "right")) - 1,
                   int(np.searchsorted(ends, first + budget, "left")), len(position) - 1)
        j = i
        if last > i:
            joined = position[i + 1 : last + 1] == ends[i:last]
            j = last if joined.all() else i + int(joined.argmin())
        return j, int(ends[j]) - first


def decode_unit_block(data: bytes | memoryview) -> UnitBlock:
    """Every unit of ``data`` (whole units), each one's CRC32C checked: as
    :func:`~tieredstore.store.formats.record.decode_units` (not chained), which names
    a bad unit; here a bad one raises without its index."""
    if len(data) % UNIT_SIZE:
        raise RecordError(f"consume-queue bytes are {len(data)}, not whole units")
    raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, UNIT_SIZE)
    fields = raw.view(_UNIT_DTYPE)[:, 0]
    if not np.array_equal(_unit_crcs(raw[:, :_UNIT_BODY]), fields["crc"]):
        raise RecordError("a consume-queue unit of the read fails its CRC32C")
    return UnitBlock(fields["position"].astype(np.int64), fields["size"].astype(np.int64),
                     fields["tags_hash"].astype(np.int64),
                     fields["store_timestamp"].astype(np.int64))


@cache
def _crc_tables(length: int) -> tuple[Any, int]:
    """For messages of ``length`` bytes: what each byte value at each position
    adds (XOR) to the CRC32C of ``length`` zero bytes, and that CRC32C."""
    zeros = crc32c(bytes(length))
    tables = np.empty((length, 256), dtype=np.uint32)
    for at in range(length):
        message = bytearray(length)
        for value in range(256):
            message[at] = value
            tables[at, value] = crc32c(message) ^ zeros
    return tables, zeros


def _unit_crcs(rows: Any) -> Any:
    """The CRC32C of each row of the uint8 array ``rows`` (all of one length):
    CRC32C over a fixed length is affine in the message's bits, so it is the
    zeros' CRC XOR one table entry per byte."""
    tables, zeros = _crc_tables(rows.shape[1])
    picked = tables[np.arange(rows.shape[1]), rows]
    return np.bitwise_xor.reduce(picked, axis=1) ^ np.uint32(zeros)


def _windows(view: memoryview) -> Any:
    """Every :data:`BODY_AT` bytes of ``view`` from each position, as rows of a
    view (no copy): a record's head is one row, picked by its start."""
    return np.lib.stride_tricks.sliding_window_view(np.frombuffer(view, dtype=np.uint8),
                                                    BODY_AT)


def plain_run_block(view: memoryview, units: UnitBlock, start: int, stop: int, *,
                    first_offset: int, room: int, first: bool) -> Int64s:
    """:func:`~tieredstore.store.formats.record.plain_run` over ``units[start:stop]``
    (the same records checked and taken, the same checks), as one array: where
    each record taken begins in ``view``, and where the last ends."""
    size = units.size[start:stop]
    ends = np.cumsum(size)
    starts = ends - size
    # What a unit alone says: big enough for a plain record, no tags, within
    # the bytes read and the room left (the first record whatever its size).
    fits = (size >= BODY_AT) & (units.tags_hash[start:stop] == 0) & (ends <= len(view))
    roomy = ends <= room
    if first and len(roomy):
        roomy[0] = True
    ok = fits & roomy
    n = len(ok) if ok.all() else int(ok.argmin())
    if n:
        heads = _windows(view)[starts[:n]]
        head = heads.view(_PLAIN_DTYPE)[:, 0]
        size, starts, ends = size[:n], starts[:n], ends[:n]
        good = ((head["total"] == size) & (head["magic"] == MAGIC) & (head["flags"] == 0)
                & (head["tags"] == NO_TAGS) & (head["keys"] == 0) & (head["properties"] == 0)
                & (head["body"].astype(np.int64) + BODY_AT == size)
                & (head["offset"].astype(np.int64) == first_offset + start + np.arange(n))
                & (head["store_timestamp"] == units.store_timestamp[start:start + n]))
        n = len(good) if good.all() else int(good.argmin())
        if n:
            crcs = np.array([crc32c(view[a:b]) for a, b in zip(
                (starts[:n] + HEAD_SIZE).tolist(), ends[:n].tolist(), strict=True)],
                dtype=np.uint32)
            same = crcs == head["crc"][:n]
            n = n if same.all() else int(same.argmin())
    out = np.empty(n + 1, dtype=np.int64)
    out[0] = 0
    out[1:] = ends[:n]
    return out
