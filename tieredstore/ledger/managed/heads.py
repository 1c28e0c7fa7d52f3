"""The versions of one managed ledger's head in the object store.

The same compare-and-swap as :mod:`tieredstore.metadata.heads`, over our own
head message: version ``v`` is ``head-{v:020d}``, created with
``If-None-Match: *``; of two writers at ``v`` one gets the key and the other
is fenced. The newest two versions are kept, and every write is followed by
a listing of the heads, so a writer two versions behind (whose next key is
free again once older heads are deleted) finds out and is fenced.
"""

from __future__ import annotations

import logging

from tieredstore.errors import ObjectNotFound, ObjectStoreError, PreconditionFailed
from tieredstore.ledger import managed_ledger_pb2 as pb
from tieredstore.ledger.errors import ManagedLedgerError, ManagedLedgerFenced
from tieredstore.ledger.managed.codec import decode_head
from tieredstore.ledger.managed.keys import ManagedLedgerPath
from tieredstore.objectstore.base import ObjectStore

log = logging.getLogger(__name__)

KEEP_VERSIONS = 2
_LOAD_ATTEMPTS = 5


class HeadLog:
    """Loads the newest head of a managed ledger and writes the next one."""

    def __init__(self, store: ObjectStore, path: ManagedLedgerPath) -> None:
        self.store = store
        self.path = path

    async def versions(self) -> list[int]:
        """Every head version present, ascending. One LIST request."""
        found: list[int] = []
        for info in await self.store.list_all(self.path.heads_prefix):
            version = self.path.head_version(info.key)
            if version is not None:
                found.append(version)
        return sorted(found)

    async def load(self) -> tuple[int, pb.ManagedLedgerHead] | None:
        """The newest head and its version; None when there is none."""
        for _ in range(_LOAD_ATTEMPTS):
            versions = await self.versions()
            if not versions:
                return None
            key = self.path.head_key(versions[-1])
            try:
                data = await self.store.get(key)
            except ObjectNotFound:
                continue  # two newer heads were written meanwhile
            return versions[-1], decode_head(data, key, versions[-1], name=self.path.name)
        raise ManagedLedgerError("the head kept changing while it was loaded",
                                 name=self.path.name)

    async def create(self, version: int, data: bytes) -> None:
        """Create head ``version``; ``ManagedLedgerFenced`` if another writer
        holds it. Identical bytes there are our own earlier attempt (they carry
        this session's random id)."""
        key = self.path.head_key(version)
        try:
            await self.store.put(key, data, if_none_match=True)
            return
        except PreconditionFailed:
            pass
        try:
            existing: bytes | None = await self.store.get(key)
        except ObjectNotFound:
            existing = None
        if existing != data:
            raise ManagedLedgerFenced(f"head version {version} was written by another writer",
                                      name=self.path.name)

    async def confirm(self, version: int) -> None:
        """After creating ``version``: fenced if a newer head exists, else drop
        the versions older than the newest two."""
        versions = await self.versions()
        if versions and versions[-1] > version:
            raise ManagedLedgerFenced(f"head version {versions[-1]} is newer than ours "
                                      f"({version})", name=self.path.name)
        old = [self.path.head_key(v) for v in versions if v <= version - KEEP_VERSIONS]
        if old:
            try:
                await self.store.delete_many(old)
            except ObjectStoreError as exc:  # harmless: the next write deletes them
                log.warning("%s: could not delete old heads: %s", self.path.name, exc)
