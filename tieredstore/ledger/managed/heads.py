"""The versions of one managed ledger's head in the object store: the same
compare-and-swap as queue heads (:mod:`tieredstore.metadata.versions`), over
our own head message."""

from __future__ import annotations

from tieredstore.ledger import managed_ledger_pb2 as pb
from tieredstore.ledger.errors import (
    CorruptManagedLedger,
    ManagedLedgerError,
    ManagedLedgerFenced,
)
from tieredstore.ledger.managed.format import decode_head
from tieredstore.ledger.managed.keys import ManagedLedgerPath
from tieredstore.metadata.versions import KEEP_VERSIONS, VersionedHeads
from tieredstore.objectstore.base import ObjectStore

__all__ = ["KEEP_VERSIONS", "ManagedLedgerHeadLog"]


class ManagedLedgerHeadLog(VersionedHeads[pb.ManagedLedgerHead]):
    """Loads the newest head of a managed ledger and writes the next one."""

    def __init__(self, store: ObjectStore, path: ManagedLedgerPath) -> None:
        super().__init__(
            store,
            path,
            decode=lambda data, key, version: decode_head(data, key, version, name=path.name),
            fenced=lambda message: ManagedLedgerFenced(message, name=path.name),
            error=lambda message: ManagedLedgerError(message, name=path.name),
            corrupt=CorruptManagedLedger,
        )
        self.path = path
