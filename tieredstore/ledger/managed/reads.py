"""Reading a managed ledger: a handle on the copy of a ledger the read priority picks.

The current ledger is read through its writer. A sealed ledger is read from
its local or its offloaded copy, in the order
:func:`~tieredstore.ledger.managed.sources.choose_sources` gives (the local
copy may be gone by the time it is opened: then the offloaded one is read);
open handles are kept in a small LRU.
"""

from __future__ import annotations

from tieredstore.ledger.errors import LedgerNotFound, ManagedLedgerError, PositionOutOfRange
from tieredstore.ledger.handle import LedgerEntry, ReadHandle
from tieredstore.ledger.managed import state
from tieredstore.ledger.managed.base import ManagedLedgerBase
from tieredstore.ledger.managed.position import Position
from tieredstore.ledger.managed.sources import LedgerCopy, choose_sources, open_copy


class Reading(ManagedLedgerBase):
    """Reads of entries, from the current ledger or a sealed ledger's copy."""

    async def read_entries(self, ledger_id: int, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last`` of a ledger, from the copy the read priority picks."""
        handle = await self.read_handle(ledger_id)
        return await handle.read(first, last)

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
                except LedgerNotFound:
                    if i + 1 < len(sources):
                        continue  # the local copy is gone: read the offloaded one
                    raise
                await self._handles.put(source, ledger_id, handle)
            self.reads_by_source[source] += 1
            return handle
        raise ManagedLedgerError(f"ledger {ledger_id} has neither a local nor an "
                                 "offloaded copy", name=self.name)

