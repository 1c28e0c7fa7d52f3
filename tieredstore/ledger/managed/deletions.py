"""Deleting a managed ledger's data: local copies once offloaded, and trimmed ledgers.

Every delete comes after the head write that drops what it deletes
(docs/ledgers.md, *Managed-ledger metadata*): a takeover fences that write, so
a replaced owner raises :class:`~tieredstore.ledger.errors.ManagedLedgerFenced`
and deletes nothing the new owner's head still lists. A lost reply is settled
at once (:meth:`ManagedLedgerMetadata.update_settled`).

``delete_offloaded_local_copies`` marks the local copies of ledgers whose
offload was recorded complete at least the deletion lag (4 hours by default)
ago deleted, then deletes them (the ledgers' records can no longer change and
move to a page); it also deletes what a crash after such a head write left:
every local ledger of this managed ledger that its head says is gone
(:func:`~tieredstore.ledger.managed.meta.state.local_copy_gone`). ``trim`` and
``apply_retention`` move the ``first`` pointer past the oldest ledgers, then
delete both their copies; the offload attempts a crash leaves are the offload
sweep's (:func:`~tieredstore.ledger.managed.gc.sweep_offloads`).
"""

from __future__ import annotations

import logging

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.ledger.errors import CorruptLedger, LedgerNotFound, PositionOutOfRange
from tieredstore.ledger.managed.base import MANAGED_LEDGER_KEY, ManagedLedgerBase
from tieredstore.ledger.managed.meta import state
from tieredstore.ledger.managed.meta.format import offload_uuid
from tieredstore.ledger.managed.policy import retention_trims
from tieredstore.ledger.managed.sources import LedgerCopy

log = logging.getLogger(__name__)


class Deleting(ManagedLedgerBase):
    """Deletions of local copies past the lag, and trims of the oldest ledgers."""

    async def delete_offloaded_local_copies(self) -> list[int]:
        """Mark the local copy of every ledger whose offload was recorded complete
        at least ``deletion_lag_seconds`` ago deleted (one head write), then
        delete those copies, and any local ledger of this managed ledger the
        head says is gone (what a crash after such a write left); return the
        ids marked."""
        self._check_open()
        async with self._data_lock:
            head = self.meta.head
            lag_ms = self.config.deletion_lag_seconds * 1000
            now = self.now_ms()
            due = [
                i.ledgerId for i in head.ledgers
                if state.is_sealed(head, i) and state.is_offloaded(i)
                and not i.offloadContext.bookkeeperDeleted
                and now - i.offloadContext.timestamp >= lag_ms
            ]
            if due:
                await self.meta.update_settled(
                    lambda h: state.mark_local_deleted(h, due),
                    landed=lambda h: all(state.local_copy_gone(h, i) for i in due))
            await self._delete_local_leftovers(checked=bool(due))
            return due

    async def _delete_local_leftovers(self, *, checked: bool) -> None:
        """Delete the local ledgers of this managed ledger that the head says are
        gone. Unless a head write just ``checked`` that no newer head exists,
        one listing of the heads first: an owner that was taken over deletes
        nothing (what it sees gone is gone for the new owner too, but a fenced
        owner does not go on deleting)."""
        head = self.meta.head
        gone = []
        for ledger_id in await self.ledgers.ledger_ids():
            if ledger_id in self._not_ours or not state.local_copy_gone(head, ledger_id):
                continue
            try:
                metadata = await self.ledgers.metadata(ledger_id)
            except LedgerNotFound:
                continue  # deleted meanwhile
            except CorruptLedger as exc:
                log.warning("%s: leaving local ledger %d alone: %s", self.name, ledger_id, exc)
                continue
            if (MANAGED_LEDGER_KEY, self.name.encode()) in metadata.custom_metadata:
                gone.append(ledger_id)
            else:
                self._not_ours.add(ledger_id)  # another's: ids are never given twice
        if not gone:
            return
        if not checked:
            await self.meta.check_current()
        for ledger_id in gone:
            await self._handles.drop(ledger_id, LedgerCopy.LOCAL)
            await self.ledgers.delete_ledger(ledger_id)
        log.info("%s: deleted the local copies of ledgers %s, which its head no longer "
                 "needs", self.name, gone)

    async def trim(self, before_ledger_id: int) -> int:
        """Drop every ledger with a smaller id (never the current one): first
        their records (one head write: a replaced owner is fenced there and
        deletes nothing), then their offloaded and local copies. Returns the
        new first ledger id. With a ledger open, an id past it drops every
        ledger but it; with none open, an id past the last ledger + 1 (no ledger
        has it or precedes it: the first pointer would move past every id ever
        given) is refused with :class:`PositionOutOfRange`, nothing changed."""
        self._check_open()
        async with self._data_lock:
            head = self.meta.head
            last = state.last_ledger_id(head)
            if state.open_ledger_id(head) is None and before_ledger_id > last + 1:
                raise PositionOutOfRange(
                    f"cannot drop the ledgers before {before_ledger_id}: the last ledger is "
                    f"{last}, so {last + 1} drops every ledger", name=self.name)
            return await self._trim_locked(before_ledger_id)

    async def _trim_locked(self, before: int) -> int:
        open_id = state.open_ledger_id(self.meta.head)
        if open_id is not None:
            before = min(before, open_id)
        if before <= self.meta.head.firstLedgerId:
            return self.meta.head.firstLedgerId
        # The head first: a crash after it leaves data no head needs (docs/ledgers.md).
        for info in await self.meta.trim(before):
            await self._handles.drop(info.ledgerId)
            await self._delete_ledger_data(info)
        return self.meta.head.firstLedgerId

    async def _delete_ledger_data(self, info: pb.LedgerInfo) -> None:
        uuid = offload_uuid(info)
        if uuid is not None:
            await self._require_offloader().delete_offloaded(info.ledgerId, uuid)
        await self.ledgers.delete_ledger(info.ledgerId)

    async def apply_retention(self) -> int | None:
        """Trim the oldest ledgers past ``retention_bytes`` or
        ``retention_seconds``; the new first ledger id, or None if none went."""
        self._check_open()
        c = self.config
        if c.retention_bytes is None and c.retention_seconds is None:
            return None
        async with self._data_lock:
            head = self.meta.head
            open_id = state.open_ledger_id(head)
            remaining = head.pagedSize + sum(i.size for i in head.ledgers)
            if self._writer is not None:
                remaining += self._writer.length
            now = self.now_ms()
            boundary = None
            async for info in self.meta.ledgers(before=open_id):
                if not retention_trims(size=info.size, timestamp_ms=info.timestamp,
                                       remaining_bytes=remaining, now_ms=now,
                                       retention_bytes=c.retention_bytes,
                                       retention_seconds=c.retention_seconds):
                    break
                remaining -= info.size
                boundary = info.ledgerId + 1
            if boundary is None:
                return None
            return await self._trim_locked(boundary)
