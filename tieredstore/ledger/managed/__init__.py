"""Managed ledgers: a log of ledgers with PIP-17 offload and seed-001 metadata
(:mod:`.meta`: the metadata, its keys, state and format)."""

from tieredstore.ledger.managed.config import ManagedLedgerConfig, ReadPriority
from tieredstore.ledger.managed.gc import (
    find_offload_garbage,
    recorded_offloads,
    sweep_offloads,
)
from tieredstore.ledger.managed.managed_ledger import ManagedLedger
from tieredstore.ledger.managed.meta.keys import LedgerPageRef, ManagedLedgerPath
from tieredstore.ledger.managed.meta.metadata import DEFAULT_PAGE_SIZE, ManagedLedgerMetadata
from tieredstore.ledger.managed.position import Position
from tieredstore.ledger.managed.sources import LedgerCopy

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "LedgerCopy",
    "LedgerPageRef",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "ManagedLedgerMetadata",
    "ManagedLedgerPath",
    "Position",
    "ReadPriority",
    "find_offload_garbage",
    "recorded_offloads",
    "sweep_offloads",
]
