"""Bytes of managed-ledger heads and pages, and offload uuids. Pure: no IO.

A head or page object is the framing of :mod:`tieredstore.metadata.format`: a
4-byte magic (``TMH1`` for a head, ``TMP1`` for a page), the CRC32C of the
payload (uint32, big-endian), then the protobuf payload
(``managed_ledger.proto``), serialized deterministically.
"""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Callable, Sequence

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.ledger.errors import CorruptManagedLedger
from tieredstore.ledger.managed.meta.keys import LedgerPageRef, ManagedLedgerPath
from tieredstore.metadata.format import frame, page_hash, parse_framed

FORMAT_VERSION = 1
HEAD_MAGIC = b"TMH1"
PAGE_MAGIC = b"TMP1"
_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def uuid_to_bits(uuid: uuid_mod.UUID) -> tuple[int, int]:
    """Java's ``getMostSignificantBits``, ``getLeastSignificantBits`` (signed)."""
    return _signed(uuid.int >> 64), _signed(uuid.int & _MASK64)


def uuid_from_bits(msb: int, lsb: int) -> uuid_mod.UUID:
    return uuid_mod.UUID(int=((msb & _MASK64) << 64) | (lsb & _MASK64))


def offload_uuid(info: pb.LedgerInfo) -> uuid_mod.UUID | None:
    """The uuid of the ledger's latest offload attempt, if one was recorded."""
    if not info.HasField("offloadContext"):
        return None
    ctx = info.offloadContext
    if not (ctx.HasField("uidMsb") and ctx.HasField("uidLsb")):
        return None
    return uuid_from_bits(ctx.uidMsb, ctx.uidLsb)


def _corrupt(name: str) -> Callable[[str], CorruptManagedLedger]:
    return lambda message: CorruptManagedLedger(message, name=name)


def stamp_head(head: pb.ManagedLedgerHead, version: int, writer_id: str, session_id: str,
               written_at_ms: int) -> None:
    """Set who wrote ``head`` as ``version``, and when."""
    head.formatVersion, head.version, head.writerId = FORMAT_VERSION, version, writer_id
    head.sessionId, head.writtenAtMs = session_id, written_at_ms


def encode_head(head: pb.ManagedLedgerHead) -> bytes:
    return frame(HEAD_MAGIC, head.SerializeToString(deterministic=True))


def decode_head(data: bytes, key: str, version: int, *, name: str = "") -> pb.ManagedLedgerHead:
    head = parse_framed(pb.ManagedLedgerHead(), HEAD_MAGIC, data, key,
                        version_field="formatVersion", version=FORMAT_VERSION,
                        corrupt=_corrupt(name))
    if head.version != version:
        raise CorruptManagedLedger(f"{key}: holds version {head.version}", name=name)
    if head.pageSize < 1:
        raise CorruptManagedLedger(f"{key}: page size {head.pageSize}", name=name)
    return head


def encode_page(ledgers: Sequence[pb.LedgerInfo]) -> bytes:
    page = pb.ManagedLedgerPage(formatVersion=FORMAT_VERSION, ledgers=ledgers)
    return frame(PAGE_MAGIC, page.SerializeToString(deterministic=True))


def build_page(path: ManagedLedgerPath, ledgers: Sequence[pb.LedgerInfo], prev_hash: int
               ) -> tuple[LedgerPageRef, bytes]:
    data = encode_page(ledgers)
    return path.page_ref(ledgers, page_hash(data), prev_hash), data


def decode_page(data: bytes, ref: LedgerPageRef, *, name: str = "") -> list[pb.LedgerInfo]:
    """The ledgers of a page read from ``ref.key``, checked against the key."""
    page = parse_framed(pb.ManagedLedgerPage(), PAGE_MAGIC, data, ref.key,
                        version_field="formatVersion", version=FORMAT_VERSION,
                        corrupt=_corrupt(name))
    if page_hash(data) != ref.page_hash:
        raise CorruptManagedLedger(f"{ref.key}: bytes do not match the hash in the key",
                                   name=name)
    ledgers = list(page.ledgers)
    if (
        not ledgers
        or len(ledgers) != ref.count
        or ledgers[0].ledgerId != ref.first_ledger
        or ledgers[-1].ledgerId != ref.last_ledger
        or sum(i.size for i in ledgers) != ref.size
    ):
        raise CorruptManagedLedger(f"{ref.key}: ledgers do not match the key", name=name)
    return ledgers
