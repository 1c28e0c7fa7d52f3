"""Golden bytes of what the managed-ledger metadata writes, built by hand from
the format description (protobuf wire format: tag = field << 3 | wire type),
and the small pure pieces: uuid bits, page keys, the offset cache, user
metadata, the object names."""

from __future__ import annotations

import struct
import uuid

import crc32c as crc32c_pkg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tieredstore.ledger import managed_ledger_pb2 as pb
from tieredstore.ledger.errors import OffloadMetadataTooLarge
from tieredstore.ledger.managed.meta.format import (
    build_page,
    decode_head,
    decode_page,
    encode_head,
    offload_uuid,
    uuid_from_bits,
    uuid_to_bits,
)
from tieredstore.ledger.managed.meta.keys import ManagedLedgerPath
from tieredstore.ledger.managed.policy import LedgerSummary, offload_boundary
from tieredstore.ledger.offload.location import OffloadNamespace, parse_offload_key
from tieredstore.ledger.offload.user_metadata import build_user_metadata

# LedgerInfo{ledgerId 3, entries 10, size 1000, timestamp 5, offloadContext{
#   uidMsb 1, uidLsb -1, complete true, bookkeeperDeleted false, timestamp 7,
#   driverMetadata{name "ts", properties [{key "a", value "b"}]}}}
KEY_VALUE = bytes.fromhex("0a0161" "120162")  # 1: "a", 2: "b"
DRIVER = bytes.fromhex("0a027473") + b"\x12" + bytes([len(KEY_VALUE)]) + KEY_VALUE
CONTEXT = (
    bytes.fromhex("0801")  # 1 uidMsb varint 1
    + bytes.fromhex("10" "ffffffffffffffffff01")  # 2 uidLsb varint -1 (ten bytes)
    + bytes.fromhex("1801")  # 3 complete true
    + bytes.fromhex("2000")  # 4 bookkeeperDeleted false (proto2: present, so written)
    + bytes.fromhex("2807")  # 5 timestamp 7
    + b"\x32" + bytes([len(DRIVER)]) + DRIVER  # 6 driverMetadata
)
LEDGER_INFO = (
    bytes.fromhex("0803" "100a" "18e807" "2005")  # ledgerId 3, entries 10, size 1000, ts 5
    + b"\x2a" + bytes([len(CONTEXT)]) + CONTEXT  # 5 offloadContext
)


def ledger_info() -> pb.LedgerInfo:
    info = pb.LedgerInfo(ledgerId=3, entries=10, size=1000, timestamp=5)
    ctx = info.offloadContext
    ctx.uidMsb, ctx.uidLsb = 1, -1
    ctx.complete, ctx.bookkeeperDeleted, ctx.timestamp = True, False, 7
    ctx.driverMetadata.name = "ts"
    ctx.driverMetadata.properties.add(key="a", value="b")
    return info


def test_ledger_info_golden() -> None:
    assert len(CONTEXT) == 33
    assert ledger_info().SerializeToString(deterministic=True) == LEDGER_INFO
    parsed = pb.LedgerInfo.FromString(LEDGER_INFO)
    assert offload_uuid(parsed) == uuid.UUID("00000000-0000-0001-ffff-ffffffffffff")


def test_uuid_bits_are_javas() -> None:
    # java.util.UUID: most significant 64 bits, least significant 64 bits, signed.
    u = uuid.UUID("f0000000-0000-0001-8000-000000000002")
    assert uuid_to_bits(u) == (-0x0FFFFFFFFFFFFFFF, -0x7FFFFFFFFFFFFFFE)
    assert uuid_from_bits(*uuid_to_bits(u)) == u


@given(st.uuids())
def test_uuid_bits_round_trip(u: uuid.UUID) -> None:
    msb, lsb = uuid_to_bits(u)
    assert -(2**63) <= msb < 2**63 and -(2**63) <= lsb < 2**63
    assert uuid_from_bits(msb, lsb) == u


def test_head_frame_golden() -> None:
    head = pb.ManagedLedgerHead(formatVersion=1, version=2, pageSize=4, firstLedgerId=0,
                                lastLedgerOpen=True, ledgers=[pb.LedgerInfo(ledgerId=9)])
    payload = bytes.fromhex(
        "0801"  # 1 formatVersion 1
        "1002"  # 2 version 2
        "3004"  # 6 pageSize 4
        "3800"  # 7 firstLedgerId 0
        "6a02" "0809"  # 13 ledgers: LedgerInfo{ledgerId 9}
        "7001"  # 14 lastLedgerOpen true
    )
    data = encode_head(head)
    assert data == b"TMH1" + struct.pack(">I", crc32c_pkg.crc32c(payload)) + payload
    assert decode_head(data, "k", 2) == head


def test_page_key_and_bytes_golden() -> None:
    path = ManagedLedgerPath("root", "tenant/ns/persistent/t")
    assert path.base == "root/ml/tenant%2Fns%2Fpersistent%2Ft/"
    assert path.head_key(7) == "root/ml/tenant%2Fns%2Fpersistent%2Ft/head-00000000000000000007"
    a, b = ledger_info(), pb.LedgerInfo(ledgerId=5, entries=1, size=24, timestamp=9)
    ref, data = build_page(path, [a, b], prev_hash=0xABC)
    payload = b"\x08\x01" + b"\x12" + bytes([len(LEDGER_INFO)]) + LEDGER_INFO + \
        bytes.fromhex("1208" "0805" "1001" "1818" "2009")  # 2: LedgerInfo{5, 1, 24, 9}
    assert data == b"TMP1" + struct.pack(">I", crc32c_pkg.crc32c(payload)) + payload
    assert ref.key == (
        "root/ml/tenant%2Fns%2Fpersistent%2Ft/pages/page-00000000000000000003"
        "-00000000000000000005-0000000002-00000000000000001024-00000000000000000009"
        f"-{ref.page_hash:016x}-0000000000000abc"
    )
    assert path.parse_page_key(ref.key) == ref
    assert decode_page(data, ref) == [a, b]


def test_user_metadata_rules() -> None:
    meta = build_user_metadata({"ManagedLedgerName": "a/b"}, {"ledger-id": "1"})
    assert meta == {"managedledgername": "a/b", "ledger-id": "1",
                    "s3managedledgeroffloaderformatversion": "1"}
    limit = 2048 - len("s3managedledgeroffloaderformatversion") - 1 - len("k")
    build_user_metadata({"k": "v" * limit}, {})  # exactly at the limit
    with pytest.raises(OffloadMetadataTooLarge, match="2049 bytes"):
        build_user_metadata({"k": "v" * (limit + 1)}, {})


def test_offload_keys() -> None:
    u = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    space = OffloadNamespace("off")
    loc = space.locate(42, u)
    assert (loc.data_key, loc.index_key) == (f"off/{u}-ledger-42", f"off/{u}-ledger-42-index")
    assert OffloadNamespace("").locate(42, u).data_key == f"{u}-ledger-42"
    for key in (loc.index_key, loc.data_key):
        assert space.attempt_of(key) == loc
        name = parse_offload_key(key)
        assert name is not None and (name.uuid, name.ledger_id) == (u, 42)
    assert parse_offload_key("off/x/y") is None
    assert space.attempt_of(f"off/x/{u}-ledger-42") is None  # not at the prefix's level
    assert space.attempt_of(f"off/{u}-ledger-42-other") is None
    assert space.attempt_of(f"other/{u}-ledger-42") is None


def test_offload_boundary_policy() -> None:
    sealed = [LedgerSummary(i, 100, 1000 * i, offloaded=i < 1) for i in range(5)]
    assert offload_boundary(sealed, open_size=0, now_ms=0, threshold_bytes=250,
                            threshold_seconds=None) == 3  # 4, 3, 2 sum to 300 > 250
    assert offload_boundary(sealed, open_size=0, now_ms=0, threshold_bytes=1000,
                            threshold_seconds=None) is None
    assert offload_boundary(sealed, open_size=0, now_ms=4500, threshold_bytes=None,
                            threshold_seconds=2) == 3  # closed at <= 2500 ms
    assert offload_boundary(sealed, open_size=0, now_ms=1500, threshold_bytes=None,
                            threshold_seconds=1) is None  # only ledger 0, done already
