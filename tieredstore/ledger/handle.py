"""ReadHandle: how a ledger is read, wherever it lives (BookKeeper's ``ReadHandle``).

A ledger is a run of entries with ids ``0..last_add_confirmed``. Every
implementation (the local ledger store, an offloaded ledger) answers the same
calls with the same values, so a reader does not care which one it holds.
:class:`LedgerMetadata` is BookKeeper's ledger metadata (seed 004): ensemble
size, write and ack quorum, digest type, state, last entry id and length; it
converts to and from BookKeeper's ``LedgerMetadataFormat`` protobuf, which an
offload stores in its index object.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field

from tieredstore.ledger.format import BytesLike, EntryOutOfRange, LedgerFormatError
from tieredstore.ledger.index import parse_ledger_metadata
from tieredstore.ledger.ledger_metadata_pb2 import LedgerMetadataFormat


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One entry of a ledger: its id and its payload."""

    entry_id: int
    payload: bytes

    def __len__(self) -> int:
        return len(self.payload)


class DigestType(enum.IntEnum):
    """How entries are checked (BookKeeper's values)."""

    CRC32 = 1
    HMAC = 2
    CRC32C = 3
    DUMMY = 4


class LedgerState(enum.IntEnum):
    """BookKeeper's ledger states: written to, being recovered, closed."""

    OPEN = 1
    IN_RECOVERY = 2
    CLOSED = 3


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    """BookKeeper ledger metadata. ``last_entry_id`` is -1 for an empty ledger;
    ``length`` is the sum of the payload sizes. ``ensembles`` maps the first
    entry id of each ensemble to its members (bookie addresses)."""

    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    digest_type: DigestType = DigestType.CRC32C
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = -1
    length: int = 0
    ctime_ms: int = 0
    ensembles: tuple[tuple[int, tuple[str, ...]], ...] = ()
    custom_metadata: tuple[tuple[str, bytes], ...] = field(default=())

    def __post_init__(self) -> None:
        if not 1 <= self.ack_quorum_size <= self.write_quorum_size <= self.ensemble_size:
            raise LedgerFormatError(
                "need 1 <= ack quorum <= write quorum <= ensemble size, got "
                f"{self.ack_quorum_size}, {self.write_quorum_size}, {self.ensemble_size}"
            )
        if self.last_entry_id < -1 or self.length < 0:
            raise LedgerFormatError(
                f"bad last entry id {self.last_entry_id} or length {self.length}"
            )

    @property
    def closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    def to_proto(self) -> LedgerMetadataFormat:
        """BookKeeper's ``LedgerMetadataFormat`` (``quorumSize`` is the write quorum)."""
        msg = LedgerMetadataFormat(
            quorumSize=self.write_quorum_size,
            ensembleSize=self.ensemble_size,
            length=self.length,
            lastEntryId=self.last_entry_id,
            state=int(self.state),  # type: ignore[arg-type]
            digestType=int(self.digest_type),  # type: ignore[arg-type]
            ackQuorumSize=self.ack_quorum_size,
            ctime=self.ctime_ms,
        )
        for first, members in self.ensembles:
            msg.segment.add(ensembleMember=list(members), firstEntryId=first)
        for key, value in self.custom_metadata:
            msg.customMetadata.add(key=key, value=value)
        return msg

    def to_bytes(self) -> bytes:
        return self.to_proto().SerializeToString()  # every required field is set

    @classmethod
    def from_proto(cls, msg: LedgerMetadataFormat) -> LedgerMetadata:
        try:
            digest = DigestType(msg.digestType) if msg.HasField("digestType") else DigestType.CRC32
            state = LedgerState(msg.state)
        except ValueError as exc:
            raise LedgerFormatError(f"ledger metadata: {exc}") from None
        return cls(
            ensemble_size=msg.ensembleSize,
            write_quorum_size=msg.quorumSize,
            ack_quorum_size=msg.ackQuorumSize if msg.HasField("ackQuorumSize") else msg.quorumSize,
            digest_type=digest,
            state=state,
            last_entry_id=msg.lastEntryId if msg.HasField("lastEntryId") else -1,
            length=msg.length,
            ctime_ms=msg.ctime,
            ensembles=tuple((s.firstEntryId, tuple(s.ensembleMember)) for s in msg.segment),
            custom_metadata=tuple((c.key, c.value) for c in msg.customMetadata),
        )

    @classmethod
    def from_bytes(cls, data: BytesLike) -> LedgerMetadata:
        return cls.from_proto(parse_ledger_metadata(data))


class ReadHandle(abc.ABC):
    """A ledger opened for reading.

    ``read(first, last)`` returns entries ``first..last`` (inclusive), in
    order, each checked against its digest; ids outside
    ``0..last_add_confirmed`` raise
    :class:`~tieredstore.ledger.format.EntryOutOfRange`.
    """

    @property
    @abc.abstractmethod
    def ledger_id(self) -> int: ...

    @property
    @abc.abstractmethod
    def metadata(self) -> LedgerMetadata: ...

    @property
    def last_add_confirmed(self) -> int:
        """The last entry id a reader may read (-1: none)."""
        return self.metadata.last_entry_id

    @property
    def length(self) -> int:
        """Sum of the payload sizes of entries ``0..last_add_confirmed``."""
        return self.metadata.length

    @property
    def closed(self) -> bool:
        """Whether the ledger is closed (sealed): it will never change again."""
        return self.metadata.closed

    @abc.abstractmethod
    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last``, inclusive."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release what the handle holds. Reading afterwards is an error."""

    async def __aenter__(self) -> ReadHandle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def check_range(ledger_id: int, first: int, last: int, last_add_confirmed: int) -> None:
    """Refuse a read outside ``0..last_add_confirmed`` or with ``first > last``."""
    if not 0 <= first <= last <= last_add_confirmed:
        raise EntryOutOfRange(
            f"ledger {ledger_id}: cannot read entries {first}..{last}; "
            + (
                "it has no entries"
                if last_add_confirmed < 0
                else f"it holds entries 0..{last_add_confirmed}"
            )
        )

