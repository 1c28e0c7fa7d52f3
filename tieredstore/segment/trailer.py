"""The unit table at the end of a merged ``segment`` object.

A merged object is the segment's bytes, ``[0, data_size)``, followed by its
unit table and a fixed footer, so that the data keeps its positions (byte p of
the segment is byte p of the object) and recovery needs one ranged GET of the
tail. All integers big-endian::

    table:  unit_count x (position u64, length u64, crc32c u32)
    footer: magic "TSSG", version u16 (=1), reserved u16, data_size u64,
            unit_count u32, table_crc32c u32, footer_crc32c u32 (of the
            preceding 24 footer bytes), 4 zero bytes          -> 32 bytes
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.checksum import crc32c
from tieredstore.errors import CorruptSegment
from tieredstore.segment.layout import ChunkRef

MAGIC = b"TSSG"
VERSION = 1
_ENTRY = struct.Struct(">QQI")
_FOOTER_HEAD = struct.Struct(">4sHHQII")
_FOOTER = struct.Struct(">24sI4x")
FOOTER_SIZE = _FOOTER.size  # 32


@dataclass(frozen=True, slots=True)
class Footer:
    data_size: int
    unit_count: int
    table_crc: int

    @property
    def table_size(self) -> int:
        return self.unit_count * _ENTRY.size

    @property
    def trailer_size(self) -> int:
        return self.table_size + FOOTER_SIZE


def encode_trailer(units: Sequence[ChunkRef]) -> bytes:
    """Table and footer for ``units`` (contiguous from 0, CRCs known)."""
    position = 0
    parts: list[bytes] = []
    for unit in units:
        if unit.position != position or unit.crc32c is None:
            raise ValueError(f"units must be contiguous with known CRCs, bad unit {unit}")
        parts.append(_ENTRY.pack(unit.position, unit.length, unit.crc32c))
        position = unit.end
    table = b"".join(parts)
    head = _FOOTER_HEAD.pack(MAGIC, VERSION, 0, position, len(units), crc32c(table))
    return table + _FOOTER.pack(head, crc32c(head))


def decode_footer(tail: bytes, *, segment: str) -> Footer:
    """Parse the last 32 bytes of a merged object."""
    if len(tail) < FOOTER_SIZE:
        raise CorruptSegment(f"merged object is {len(tail)} bytes, too short", segment=segment)
    head, footer_crc = _FOOTER.unpack(tail[-FOOTER_SIZE:])
    magic, version, _, data_size, count, table_crc = _FOOTER_HEAD.unpack(head)
    if magic != MAGIC:
        raise CorruptSegment(f"merged object footer has magic {magic!r}, not {MAGIC!r}",
                             segment=segment)
    if crc32c(head) != footer_crc:
        raise CorruptSegment("merged object footer fails its CRC32C", segment=segment)
    if version != VERSION:
        raise CorruptSegment(f"merged object format version {version} is unknown",
                             segment=segment)
    return Footer(data_size, count, table_crc)


def decode_table(table: bytes, footer: Footer, key: str, *, segment: str) -> list[ChunkRef]:
    """The units, checked: CRC of the table, contiguous, summing to data_size."""
    if len(table) != footer.table_size or crc32c(table) != footer.table_crc:
        raise CorruptSegment("merged object unit table fails its CRC32C", segment=segment)
    units: list[ChunkRef] = []
    position = 0
    for offset in range(0, len(table), _ENTRY.size):
        unit_position, length, crc = _ENTRY.unpack_from(table, offset)
        if unit_position != position or length <= 0:
            raise CorruptSegment(f"merged unit table is not contiguous at {position}",
                                 segment=segment)
        units.append(ChunkRef(unit_position, length, key, unit_position, crc))
        position += length
    if position != footer.data_size:
        raise CorruptSegment(
            f"merged unit table covers {position} bytes, footer says {footer.data_size}",
            segment=segment,
        )
    return units
