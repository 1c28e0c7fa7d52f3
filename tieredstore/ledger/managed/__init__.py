"""Managed ledgers: a log of ledgers with PIP-17 offload and seed-001 metadata."""

from tieredstore.ledger.managed.config import ManagedLedgerConfig, ReadPriority
from tieredstore.ledger.managed.keys import ManagedLedgerPath, PageRef
from tieredstore.ledger.managed.managed_ledger import ManagedLedger, Position
from tieredstore.ledger.managed.metadata import DEFAULT_PAGE_SIZE, ManagedLedgerMetadata
from tieredstore.ledger.managed.sources import Source
from tieredstore.ledger.managed.sweep import (
    OffloadGarbage,
    find_offload_garbage,
    referenced_offloads,
    sweep_offloads,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "ManagedLedgerMetadata",
    "ManagedLedgerPath",
    "OffloadGarbage",
    "PageRef",
    "Position",
    "ReadPriority",
    "Source",
    "find_offload_garbage",
    "referenced_offloads",
    "sweep_offloads",
]
