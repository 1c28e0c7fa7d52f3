"""Deleting a managed ledger's data: local copies once offloaded, and trimmed ledgers.

The local copy of an offloaded ledger is deleted by
``delete_offloaded_local_copies`` only once the offload is recorded complete
and the deletion lag (4 hours by default) has passed since; after that, the
ledger's record can no longer change and moves to a page. ``trim`` and
``apply_retention`` drop the oldest ledgers (both copies) and move the
``first`` pointer.
"""

from __future__ import annotations

from tieredstore.ledger import managed_ledger_pb2 as pb
from tieredstore.ledger.errors import PositionOutOfRange
from tieredstore.ledger.managed import state
from tieredstore.ledger.managed.base import ManagedLedgerBase
from tieredstore.ledger.managed.format import offload_uuid
from tieredstore.ledger.managed.policy import retention_trims
from tieredstore.ledger.managed.sources import LedgerCopy


class Deleting(ManagedLedgerBase):
    """Deletions of local copies past the lag, and trims of the oldest ledgers."""

    async def delete_offloaded_local_copies(self) -> list[int]:
        """Delete the local copy of every ledger whose offload was recorded
        complete at least ``deletion_lag_seconds`` ago; return their ids."""
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
            for ledger_id in due:
                await self._handles.drop(ledger_id, LedgerCopy.LOCAL)
                await self.ledgers.delete_ledger(ledger_id)
            if due:
                await self.meta.update(lambda h: state.mark_local_deleted(h, due))
            return due

    async def trim(self, before_ledger_id: int) -> int:
        """Drop every ledger with a smaller id (never the current one): their
        local and offloaded copies, then their records. Returns the new first
        ledger id. With a ledger open, an id past it drops every ledger but it;
        with none open, an id past the last ledger + 1 (no ledger has it or
        precedes it: the first pointer would move past every id ever given) is
        refused with :class:`PositionOutOfRange`, nothing changed."""
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
        doomed = [info async for info in self.meta.ledgers(before=before)]
        for info in doomed:  # data first: a crash here leaves records to trim again
            await self._handles.drop(info.ledgerId)
            await self._delete_ledger_data(info)
        await self.meta.trim(before)
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
