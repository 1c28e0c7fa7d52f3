"""Reading a managed ledger: a handle on the copy of a ledger the read priority picks.

The current ledger is read through its writer. A sealed ledger is read from
its local or its offloaded copy, in the order
:func:`~tieredstore.ledger.managed.sources.choose_sources` gives (the local
copy may be gone by the time it is opened: then the offloaded one is read);
open handles are kept in a small LRU. A copy the head names that is not found
at all may have been trimmed by an owner that took the managed ledger over:
one listing of the heads says so (:class:`ManagedLedgerFenced`, naming the
ledger), else the missing copy's error stands (docs/ledgers.md, *Managed-ledger
metadata*).
"""

from __future__ import annotations

from tieredstore.ledger.errors import (
    LedgerNotFound,
    ManagedLedgerError,
    ManagedLedgerFenced,
    OffloadNotFound,
    PositionOutOfRange,
)
from tieredstore.ledger.handle import LedgerEntry, ReadHandle
from tieredstore.ledger.managed.base import ManagedLedgerBase
from tieredstore.ledger.managed.meta import state
from tieredstore.ledger.managed.position import Position
from tieredstore.ledger.managed.sources import LedgerCopy, choose_sources, open_copy


class Reading(ManagedLedgerBase):
    """Reads of entries, from the current ledger or a sealed ledger's copy."""

    async def read_entries(self, ledger_id: int, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last`` of a ledger, from the copy the read priority picks."""
        handle = await self.read_handle(ledger_id)
        try:
            return await handle.read(first, last)
        except (LedgerNotFound, OffloadNotFound) as exc:  # gone since it was opened
            await self._check_not_taken_over(ledger_id, exc)
            raise

    async def read_entry(self, position: Position) -> LedgerEntry:
        (entry,) = await self.read_entries(position.ledger_id, position.entry_id,
                                           position.entry_id)
        return entry

    async def read_handle(self, ledger_id: int) -> ReadHandle:
        """An open handle on the ledger (owned by the managed ledger: do not
        close it), local or offloaded as ``read_priority`` says."""
        self._check_open()
        writer = self._writer
        if writer is not None and ledger_id == writer.ledger_id:
            self.reads_by_source[LedgerCopy.LOCAL] += 1
            return writer
        info = await self.meta.ledger(ledger_id)
        if info is None or not state.is_sealed(self.meta.head, info):
            raise PositionOutOfRange(f"ledger {ledger_id} is not a live ledger of it",
                                     name=self.name)
        sources = choose_sources(info, self.config.read_priority)
        for i, source in enumerate(sources):
            handle = self._handles.get(source, ledger_id)
            if handle is None:
                try:
                    handle = await open_copy(source, info, self.ledgers, self.offloader)
                except (LedgerNotFound, OffloadNotFound) as exc:
                    if i + 1 < len(sources):
                        continue  # the local copy is gone: read the offloaded one
                    await self._check_not_taken_over(ledger_id, exc)
                    raise
                await self._handles.put(source, ledger_id, handle)
            self.reads_by_source[source] += 1
            return handle
        raise ManagedLedgerError(f"ledger {ledger_id} has neither a local nor an "
                                 "offloaded copy", name=self.name)

    async def _check_not_taken_over(self, ledger_id: int, missing: Exception) -> None:
        """A copy of ``ledger_id`` that our head names is not there: raise
        :class:`ManagedLedgerFenced` if another owner wrote a newer head (it may
        have trimmed the ledger; this owner is fenced from now on). One LIST;
        if it fails, the missing copy's error stands."""
        try:
            await self.meta.check_current()
        except ManagedLedgerFenced as exc:
            raise ManagedLedgerFenced(
                f"ledger {ledger_id} is not there ({missing}): another owner took the managed "
                f"ledger over and may have trimmed it ({exc})", name=self.name) from missing
        except Exception:
            return  # cannot tell: the caller raises the missing copy's error
