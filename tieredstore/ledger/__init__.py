"""Pulsar adapter: the PIP-17 ledger offload formats and, around them, the offloader.

- :mod:`.format`, :mod:`.block`, :mod:`.index`, :mod:`.stream`: the PIP-17 codec (pure).
- :mod:`.handle`: ``ReadHandle``, ``LedgerEntry``, ``LedgerMetadata``.
- :mod:`.local`: a ledger store on local files (BookKeeper's part, for hosts without it).
- :mod:`.offload`: ``LedgerOffloader`` on the segment engine, the read handle of an
  offloaded ledger, where offloads are kept and what they record.
- :mod:`.managed`: managed ledgers, their offload triggers and their metadata.
- :mod:`.slices`: offloaded ledgers read in slices (planned, then each read), for Spark.
"""

from tieredstore.ledger.compose import (
    LedgerHost,
    LedgerRow,
    ledger_dir,
    managed_ledger_config,
    offload_garbage,
    offload_namespace,
    offload_options,
)
from tieredstore.ledger.errors import (
    CorruptLedger,
    CorruptManagedLedger,
    DigestMismatch,
    LedgerClosed,
    LedgerError,
    LedgerExists,
    LedgerFenced,
    LedgerNotFound,
    ManagedLedgerClosed,
    ManagedLedgerError,
    ManagedLedgerFenced,
    ManagedLedgerNotFound,
    NoOffloader,
    OffloadError,
    OffloadExists,
    OffloadFenced,
    OffloadInProgress,
    OffloadMetadataTooLarge,
    OffloadNotFound,
    OffloadRefused,
    PositionOutOfRange,
)
from tieredstore.ledger.format import EntryOutOfRange, EntryTooLarge, LedgerFormatError
from tieredstore.ledger.handle import (
    DigestType,
    LedgerEntry,
    LedgerMetadata,
    LedgerState,
    ReadHandle,
)
from tieredstore.ledger.local import LocalLedgerStore, LocalLedgerWriter, LocalReadHandle
from tieredstore.ledger.managed import (
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerMetadata,
    Position,
    ReadPriority,
    sweep_offloads,
)
from tieredstore.ledger.offload.location import OffloadLocation, OffloadNamespace, parse_offload_key
from tieredstore.ledger.offload.offloaded import OffloadedReadHandle
from tieredstore.ledger.offload.offloader import (
    LedgerOffloader,
    OffloadOptions,
    SegmentLedgerOffloader,
)
from tieredstore.ledger.slices import (
    LedgerSelection,
    LedgerSlice,
    plan_ledger_slices,
    read_ledger_slice,
)

__all__ = [
    "LedgerHost",
    "LedgerRow",
    "ledger_dir",
    "managed_ledger_config",
    "offload_garbage",
    "offload_namespace",
    "offload_options",
    "sweep_offloads",
    "CorruptLedger",
    "CorruptManagedLedger",
    "DigestMismatch",
    "DigestType",
    "EntryOutOfRange",
    "EntryTooLarge",
    "LedgerClosed",
    "LedgerEntry",
    "LedgerError",
    "LedgerExists",
    "LedgerFenced",
    "LedgerFormatError",
    "LedgerMetadata",
    "LedgerNotFound",
    "LedgerOffloader",
    "LedgerSelection",
    "LedgerSlice",
    "LedgerState",
    "LocalLedgerStore",
    "LocalLedgerWriter",
    "LocalReadHandle",
    "ManagedLedger",
    "ManagedLedgerClosed",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerNotFound",
    "ManagedLedgerFenced",
    "ManagedLedgerMetadata",
    "NoOffloader",
    "OffloadError",
    "OffloadExists",
    "OffloadFenced",
    "OffloadInProgress",
    "OffloadLocation",
    "OffloadMetadataTooLarge",
    "OffloadNamespace",
    "OffloadNotFound",
    "OffloadOptions",
    "OffloadRefused",
    "OffloadedReadHandle",
    "Position",
    "PositionOutOfRange",
    "ReadHandle",
    "ReadPriority",
    "SegmentLedgerOffloader",
    "parse_offload_key",
    "plan_ledger_slices",
    "read_ledger_slice",
]
