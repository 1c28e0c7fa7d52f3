"""CRC32C (Castagnoli), the checksum of every chunk, record and unit we store."""

from __future__ import annotations

from typing import Protocol, cast

import crc32c as _crc32c


class _Crc32c(Protocol):
    def __call__(self, data: bytes | bytearray | memoryview, value: int = 0, /) -> int: ...


crc32c = cast(_Crc32c, _crc32c.crc32c)
"""CRC32C of ``data``, continuing from ``value`` (the CRC of what came before).

The C function itself: it sits on every record's and unit's read path."""


def format_crc(value: int) -> str:
    """The form we keep in object metadata: 8 lowercase hex digits."""
    return f"{value:08x}"


def parse_crc(text: str) -> int:
    """Inverse of :func:`format_crc`; raises ValueError on anything else."""
    if len(text) != 8:
        raise ValueError(f"not a CRC32C: {text!r}")
    return int(text, 16)


# --- combining ----------------------------------------------------------------
# crc(A + B) from crc(A), crc(B) and len(B), without the bytes: zlib's
# crc32_combine for the Castagnoli polynomial. Appending len(B) zero bytes to A
# is a linear map on the CRC register; we keep that map for every power of two
# of bytes, so a combine costs one 32x32 GF(2) product per set bit of len(B).

_POLY = 0x82F63B78  # CRC32C, reflected


def _gf2_times(matrix: tuple[int, ...], vector: int) -> int:
    total = 0
    i = 0
    while vector:
        if vector & 1:
            total ^= matrix[i]
        vector >>= 1
        i += 1
    return total


def _gf2_square(matrix: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_gf2_times(matrix, matrix[n]) for n in range(32))


def _zero_byte_operators() -> tuple[tuple[int, ...], ...]:
    """Operators that append 2**k zero bytes, for k in 0..63."""
    one_bit = (_POLY, *(1 << n for n in range(31)))
    op = _gf2_square(_gf2_square(_gf2_square(one_bit)))  # 8 bits: one byte
    ops = [op]
    for _ in range(63):
        op = _gf2_square(op)
        ops.append(op)
    return tuple(ops)


_ZERO_OPS = _zero_byte_operators()


def crc32c_combine(crc_a: int, crc_b: int, len_b: int) -> int:
    """CRC32C of A + B, given crc(A), crc(B) and len(B)."""
    if len_b < 0:
        raise ValueError(f"negative length {len_b}")
    k = 0
    while len_b:
        if len_b & 1:
            crc_a = _gf2_times(_ZERO_OPS[k], crc_a)
        len_b >>= 1
        k += 1
    return crc_a ^ crc_b
