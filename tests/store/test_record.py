"""Record and consume-queue unit formats: golden bytes from docs/format.md, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tieredstore.checksum import crc32c
from tieredstore.store.record import (
    CqUnit,
    RecordError,
    decode_record,
    decode_unit,
    encode_record,
    encode_unit,
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
