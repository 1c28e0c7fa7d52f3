"""The array checks of a scan in columns agree with the per-row ones."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from tieredstore.checksum import crc32c
from tieredstore.store.formats.record import (
    CqUnit,
    RecordError,
    decode_units,
    encode_record,
    encode_units,
    plain_run,
    tags_hash,
)
from tieredstore.store.read.arrays import UnitBlock, _unit_crcs, decode_unit_block, plain_run_block


def _block(units: list[CqUnit]) -> UnitBlock:
    return UnitBlock(*(np.array(column, dtype=np.int64) for column in zip(*units, strict=True)))


def test_unit_crcs_are_crc32c() -> None:
    rows = np.frombuffer(os.urandom(28 * 50), dtype=np.uint8).reshape(50, 28)
    assert _unit_crcs(rows).tolist() == [crc32c(bytes(r)) for r in rows]


def test_a_unit_block_is_what_decode_units_reads_and_fails_where_it_fails() -> None:
    units = [CqUnit(i * 100, 100 + i, i * 7, 1000 + i) for i in range(64)]
    data = encode_units(units)
    block = decode_unit_block(data)
    assert list(block) == decode_units(data) == units
    assert block[3] == units[3] and list(block[5:9]) == units[5:9]
    assert list(block.take([1, 4])) == [units[1], units[4]]
    for at in (0, 17 * 32 + 5, len(data) - 1):  # any byte of any unit, its CRC too
        broken = bytearray(data)
        broken[at] ^= 0x10
        with pytest.raises(RecordError, match="CRC32C"):
            decode_unit_block(bytes(broken))
    with pytest.raises(RecordError, match="whole units"):
        decode_unit_block(data[:-1])


def _records(n: int) -> tuple[bytearray, list[CqUnit]]:
    data, units = bytearray(), []
    for i in range(n):
        kind = {"tags": "t"} if i == 30 else {"keys": ["k"]} if i == 31 else {}
        record = encode_record(i, 5000 + i, os.urandom(i * 3), **kind)  # type: ignore[arg-type]
        units.append(CqUnit(len(data), len(record), tags_hash(kind.get("tags")), 5000 + i))
        data += record
    return data, units


def test_a_plain_run_over_arrays_takes_the_records_plain_run_takes() -> None:
    data, units = _records(40)
    block = _block(units)
    rng = random.Random(7)

    def both(view: memoryview, start: int, stop: int, room: int, first: bool, *,
             cut: list[CqUnit] | None = None) -> None:
        base = units[start].position
        want = plain_run(view[base:], cut or units, start, stop, first_offset=0, room=room,
                         first=first)
        got = plain_run_block(view[base:], _block(cut or units), start, stop, first_offset=0,
                              room=room, first=first)
        assert got.tolist() == want

    view = memoryview(bytes(data))
    both(view, 0, 40, 1 << 40, True)  # stops at the record with tags (30)
    both(view, 32, 40, 1 << 40, True)
    both(view, 0, 40, 500, True)  # the room left
    both(view, 0, 40, 0, True)  # the first one whatever its size
    both(view, 0, 40, 0, False)
    assert len(block) == 40
    for _ in range(30):  # a changed byte anywhere: the same records taken
        broken = bytearray(data)
        broken[rng.randrange(units[29].end)] ^= 1 << rng.randrange(8)
        both(memoryview(bytes(broken)), 0, 30, 1 << 40, True)
    # A unit that disagrees with its record: offset, store time, size.
    for k, change in ((5, {"store_timestamp": 1}), (9, {"size": 1}), (0, {"tags_hash": 3})):
        cut = list(units)
        cut[k] = cut[k]._replace(**{f: getattr(cut[k], f) + d for f, d in change.items()})
        both(view, 0, 30, 1 << 40, True, cut=cut)


def test_a_run_over_arrays_ends_where_a_run_over_units_ends() -> None:
    from tieredstore.store.read.scan import _run_end

    rng = random.Random(3)
    for _ in range(200):
        units, at = [], rng.randrange(100)
        for _ in range(rng.randrange(1, 30)):
            size = rng.randrange(1, 50)
            units.append(CqUnit(at, size, 0, 0))
            at += size + (rng.randrange(1, 5) if rng.random() < 0.1 else 0)
        block = _block(units)
        for _ in range(5):
            i = rng.randrange(len(units))
            limit = rng.randrange(units[i].position, at + 10)
            budget = rng.randrange(1, 400)
            assert block.run_end(i, limit, budget) == _run_end(units, i, limit, budget)
