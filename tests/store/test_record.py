"""Record and consume-queue unit formats: golden bytes from docs/records.md, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tieredstore.checksum import crc32c
from tieredstore.store.formats.record import (
    CqUnit,
    Message,
    RecordError,
    decode_plain_run,
    decode_record,
    decode_unit,
    decode_units,
    encode_bare_records,
    encode_record,
    encode_unit,
    encode_units,
)


def test_record_bytes_match_the_documented_layout() -> None:
    body = b"hello"
    fields = (
        struct.pack(">QqI", 7, 1_700_000_000_000, 0)
        + struct.pack(">H", 3) + b"tag"
        + struct.pack(">H", 1) + struct.pack(">H", 2) + b"k1"
        + struct.pack(">H", 1) + struct.pack(">H", 1) + b"p" + struct.pack(">I", 2) + b"vv"
        + struct.pack(">I", 5) + body
    )
    expected = struct.pack(">III", 12 + len(fields), 0x54534D31, crc32c(fields)) + fields
    got = encode_record(7, 1_700_000_000_000, body, keys=["k1"], tags="tag",
                        properties={"p": "vv"})
    assert got == expected


def test_no_tags_is_the_0xffff_length() -> None:
    got = encode_record(0, 0, b"")
    assert got[12 + 20 : 12 + 22] == b"\xff\xff"
    assert decode_record(got, "t", 0).tags is None


def test_unit_bytes_match_the_documented_layout() -> None:
    head = struct.pack(">QIqq", 4096, 100, 42, 1_700_000_000_001)
    assert encode_unit(CqUnit(4096, 100, 42, 1_700_000_000_001)) == \
        head + struct.pack(">I", crc32c(head))


@settings(max_examples=200, deadline=None)
@given(
    offset=st.integers(0, 2**63 - 1),
    ts=st.integers(0, 2**62),
    body=st.binary(max_size=2000),
    keys=st.lists(st.text(max_size=20), max_size=4),
    tags=st.none() | st.text(max_size=30),
    props=st.dictionaries(st.text(max_size=10), st.text(max_size=30), max_size=4),
)
def test_records_round_trip(offset: int, ts: int, body: bytes, keys: list[str], *,
                            tags: str | None, props: dict[str, str]) -> None:
    data = encode_record(offset, ts, body, keys=keys, tags=tags, properties=props)
    message = decode_record(data, "topic", 3)
    assert (message.offset, message.store_timestamp, message.body) == (offset, ts, body)
    assert (list(message.keys), message.tags, dict(message.properties)) == (keys, tags, props)


def test_any_flipped_byte_is_caught() -> None:
    data = encode_record(1, 2, b"payload", keys=["a"], tags="t")
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x40
        with pytest.raises(RecordError):
            decode_record(bytes(bad), "t", 0)


def test_unit_corruption_is_caught() -> None:
    data = bytearray(encode_unit(CqUnit(1, 2, 3, 4)))
    data[5] ^= 1
    with pytest.raises(RecordError, match="CRC32C"):
        decode_unit(bytes(data))


def _bad_crc(data: bytes, index: int) -> bytes:
    """``data`` (units) with unit ``index``'s CRC32C field flipped."""
    out = bytearray(data)
    out[index * 32 + 31] ^= 1
    return bytes(out)


def test_every_unit_crc_is_checked_unless_chained() -> None:
    units = [CqUnit(100 * i, 100, 0, i) for i in range(4)]
    data = b"".join(map(encode_unit, units))
    assert decode_units(data) == decode_units(data, chained=True) == units
    for i in range(4):
        with pytest.raises(RecordError, match=f"unit {i} of the read fails its CRC32C"):
            decode_units(_bad_crc(data, i))


def test_chained_units_leave_units_that_follow_on_to_their_records() -> None:
    # Units 1 and 3 follow on from the one before: their records confirm them.
    units = [CqUnit(0, 100, 0, 0), CqUnit(100, 100, 0, 1), CqUnit(500, 100, 0, 2),
             CqUnit(600, 100, 0, 3)]
    data = b"".join(map(encode_unit, units))
    assert decode_units(_bad_crc(_bad_crc(data, 1), 3), chained=True) == units
    # The first (nothing before it to follow) and one that jumps are checked.
    for i in (0, 2):
        with pytest.raises(RecordError, match=f"unit {i} of the read fails its CRC32C"):
            decode_units(_bad_crc(data, i), chained=True)
    # ... unless the first follows on from the unit before the read.
    assert decode_units(_bad_crc(data, 0), chained=True, previous_end=0) == units
    with pytest.raises(RecordError, match="unit 0 of the read"):
        decode_units(_bad_crc(data, 0), chained=True, previous_end=1)


def _run(records: list[bytes], units: list[CqUnit], *, max_bytes: int = 1 << 30
         ) -> tuple[int, int, int, list[Message]]:
    out: list[Message] = []
    k, used, total = decode_plain_run(memoryview(b"".join(records)), units, 0, len(units),
                                      first_offset=10, topic="t", queue_id=3,
                                      out=out,
                                      total=0, max_bytes=max_bytes)
    return k, used, total, out


def _units(records: list[bytes], *, ts: int = 5, tags: int = 0) -> list[CqUnit]:
    units, at = [], 0
    for data in records:
        units.append(CqUnit(at, len(data), tags, ts))
        at += len(data)
    return units


def test_the_plain_run_decodes_what_decode_record_does() -> None:
    records = [encode_record(10 + i, 5, bytes([i]) * (i * 7)) for i in range(6)]
    k, used, total, out = _run(records, _units(records))
    assert (k, used, total) == (6, sum(map(len, records)), sum(map(len, records)))
    assert out == [decode_record(r, "t", 3) for r in records]


@pytest.mark.parametrize("change", ["tags", "keys", "properties", "offset", "timestamp",
                                    "crc", "size"])
def test_the_plain_run_stops_before_a_record_it_does_not_vouch_for(change: str) -> None:
    records = [encode_record(10 + i, 5, b"x" * 40) for i in range(4)]
    if change == "tags":
        records[2] = encode_record(12, 5, b"x" * 40, tags="a")
    elif change == "keys":
        records[2] = encode_record(12, 5, b"x" * 40, keys=["k"])
    elif change == "properties":
        records[2] = encode_record(12, 5, b"x" * 40, properties={"p": "v"})
    elif change == "offset":
        records[2] = encode_record(99, 5, b"x" * 40)
    elif change == "timestamp":
        records[2] = encode_record(12, 6, b"x" * 40)
    elif change == "crc":
        records[2] = records[2][:-1] + bytes([records[2][-1] ^ 1])
    units = _units(records)
    if change == "size":
        units[2] = units[2]._replace(size=units[2].size - 1)
    k, used, _, out = _run(records, units)
    assert k == 2 and used == len(records[0]) + len(records[1]) and len(out) == 2


def test_the_plain_run_stops_at_max_bytes_once_it_holds_a_message() -> None:
    records = [encode_record(10 + i, 5, b"x" * 100) for i in range(4)]
    size = len(records[0])
    assert _run(records, _units(records), max_bytes=size + 1)[0] == 1
    assert _run(records, _units(records), max_bytes=1)[0] == 1  # the first one always


@given(st.integers(0, 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=200))
@settings(max_examples=50)
def test_a_plain_record_has_the_documented_bytes(offset: int, ts: int, body: bytes) -> None:
    fields = (struct.pack(">QqI", offset, ts, 0) + struct.pack(">HHH", 0xFFFF, 0, 0)
              + struct.pack(">I", len(body)) + body)
    expected = struct.pack(">III", 12 + len(fields), 0x54534D31, crc32c(fields)) + fields
    assert encode_record(offset, ts, body) == expected
    assert encode_record(offset, ts, memoryview(body), properties={}) == expected


@given(st.integers(0, 2**62), st.lists(st.tuples(st.binary(max_size=300),
                                                 st.integers(-(2**63), 2**63 - 1)),
                                       max_size=20))
@settings(max_examples=50)
def test_a_batch_encodes_the_bytes_each_record_would(
        first: int, messages: list[tuple[bytes, int]]) -> None:
    bodies = [body for body, _ in messages]
    stamps = [ts for _, ts in messages]
    records = [encode_record(first + k, ts, body) for k, (body, ts) in enumerate(messages)]
    assert encode_bare_records(bodies, first, stamps) == (b"".join(records),
                                                          [len(r) for r in records])
    units = [CqUnit(k * 7, len(r), k - 3, stamps[k]) for k, r in enumerate(records)]
    assert encode_units(units) == b"".join(encode_unit(u) for u in units)
