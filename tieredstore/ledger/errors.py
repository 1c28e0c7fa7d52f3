"""Errors of the Pulsar adapter: ledgers, offloads, managed ledgers.

All derive from :class:`LedgerError` (a :class:`~tieredstore.errors.TieredStoreError`);
where a built-in type fits too it is a base as well. The codec's own errors
(:class:`~tieredstore.ledger.format.LedgerFormatError`, ``EntryTooLarge``,
``EntryOutOfRange``) live in :mod:`tieredstore.ledger.format`.
"""

from __future__ import annotations

from tieredstore.errors import Corrupt, Fenced, TieredStoreError


class LedgerError(TieredStoreError):
    """Base for errors about one ledger; ``ledger_id`` names it (None: none)."""

    def __init__(self, message: str, *, ledger_id: int | None = None) -> None:
        super().__init__(message if ledger_id is None else f"ledger {ledger_id}: {message}")
        self.ledger_id = ledger_id


# --- ledgers ------------------------------------------------------------------


class LedgerNotFound(LedgerError, FileNotFoundError):
    """No ledger with this id (never created, or deleted)."""


class LedgerExists(LedgerError, FileExistsError):
    """A ledger with this id exists already."""


class LedgerFenced(LedgerError, Fenced):
    """The ledger was fenced (opened for recovery by a new owner) or closed: this
    writer may add no more entries (BookKeeper's ``LedgerFencedException``)."""


class LedgerClosed(LedgerError):
    """The handle was closed, or the ledger is closed and takes no more entries."""


class DigestMismatch(LedgerError, Corrupt):
    """An entry read back does not match its CRC32C digest, or its header does
    not name the entry asked for (BookKeeper's ``BKDigestMatchException``)."""


class CorruptLedger(LedgerError, Corrupt):
    """A ledger's files do not agree with each other or with its metadata."""


# --- offloads -------------------------------------------------------------------


class OffloadError(LedgerError):
    """Base for errors of one offload attempt."""


class OffloadRefused(OffloadError, ValueError):
    """The ledger cannot be offloaded as it is: open, or empty."""


class OffloadExists(OffloadError, FileExistsError):
    """Objects of this attempt (uuid) are there already: an attempt names its
    objects once. Delete them (``delete_offloaded``) or use a new uuid."""


class OffloadNotFound(OffloadError, FileNotFoundError):
    """No complete offload of this ledger under this uuid."""


class OffloadFenced(OffloadError, Fenced):
    """Another writer wrote different bytes under this attempt's names."""


class OffloadMetadataTooLarge(OffloadError, ValueError):
    """The object user metadata would pass S3's 2 KB limit, or is not valid
    S3 metadata (keys must be header tokens, values printable ASCII)."""


class OffloadInProgress(OffloadError):
    """Another offload of this managed ledger is running; only one runs at a time."""


class NoOffloader(OffloadError):
    """The managed ledger has no offloader configured (PIP-17's default driver)."""


# --- managed ledgers ----------------------------------------------------------------


class ManagedLedgerError(TieredStoreError):
    """Base for errors about one managed ledger; ``name`` names it."""

    def __init__(self, message: str, *, name: str = "") -> None:
        super().__init__(f"managed ledger {name!r}: {message}" if name else message)
        self.name = name


class ManagedLedgerFenced(ManagedLedgerError, Fenced):
    """Another instance wrote a newer head of this managed ledger's metadata:
    this one lost the compare-and-swap and refuses every further write."""


class ManagedLedgerNotFound(ManagedLedgerError, LookupError):
    """No managed ledger of this name: no head of its metadata under the root."""


class ManagedLedgerClosed(ManagedLedgerError):
    """The managed ledger was closed."""


class CorruptManagedLedger(ManagedLedgerError, Corrupt):
    """A head or page of the managed ledger's metadata fails its checks."""


class PositionOutOfRange(ManagedLedgerError, IndexError):
    """A read asked for a ledger or entry the managed ledger does not hold."""
