"""Offloading a managed ledger's sealed ledgers (PIP-17), on request or by trigger.

``offload_prefix(position)`` offloads every sealed ledger before
``position``, one at a time, through a
:class:`~tieredstore.ledger.offload.offloader.LedgerOffloader`. For each, the
attempt's uuid is recorded in the metadata *before* the attempt starts; a
previous attempt that did not complete is deleted through its uuid first;
the offload is recorded complete only once its objects are all written (see
:mod:`.attempt`; what a replaced or dead owner leaves unreferenced,
:func:`~tieredstore.ledger.managed.gc.sweep_offloads` deletes). One
offload runs at a time per managed ledger: a second request meanwhile gets
:class:`~tieredstore.ledger.errors.OffloadInProgress`. ``maybe_offload`` applies
the size and age triggers (after each rollover too, with ``auto_offload``).
"""

from __future__ import annotations

from tieredstore.ledger.errors import OffloadInProgress
from tieredstore.ledger.managed.attempt import offload_attempt
from tieredstore.ledger.managed.base import ManagedLedgerBase
from tieredstore.ledger.managed.meta import state
from tieredstore.ledger.managed.policy import LedgerSummary, offload_boundary
from tieredstore.ledger.managed.position import Position
from tieredstore.tasks import Priority


class Offloading(ManagedLedgerBase):
    """Offloads of sealed ledgers, one run at a time."""

    async def offload_prefix(self, position: Position) -> Position:
        """Offload every sealed ledger before ``position``, oldest first, one at
        a time. Returns the first position not offloaded. Raises
        :class:`OffloadInProgress` if an offload is running already."""
        self._check_open()
        self._require_offloader()
        if self._offloading:
            raise OffloadInProgress(f"managed ledger {self.name!r}: an offload is running")
        self._offloading = True
        try:
            async with self._data_lock:
                head = self.meta.head
                todo = [i.ledgerId for i in head.ledgers
                        if i.ledgerId < position.ledger_id and state.is_sealed(head, i)
                        and not state.is_offloaded(i)]
                for ledger_id in todo:
                    await self._offload_ledger(ledger_id)
                return self.first_not_offloaded()
        finally:
            self._offloading = False
            if self._trigger_pending and not self._closed:
                # A trigger fired while this ran and backed off: check it again.
                self._trigger_pending = False
                self._background.spawn(self.maybe_offload(), f"offload of {self.name}",
                                       priority=Priority.OFFLOAD)

    def first_not_offloaded(self) -> Position:
        """The first position of the oldest ledger not offloaded (or past the last)."""
        head = self.meta.head
        for info in head.ledgers:
            if not state.is_offloaded(info):
                return Position(info.ledgerId, 0)
        return Position(state.last_ledger_id(head) + 1, 0)

    async def _offload_ledger(self, ledger_id: int) -> None:
        extra = {"ManagedLedgerName": self.name, **dict(self.config.offload_extra_metadata)}
        try:
            done = await offload_attempt(self.meta, self.ledgers, self._require_offloader(),
                                         ledger_id, extra_metadata=extra, now_ms=self.now_ms)
        except BaseException:
            self.offloads_failed += 1
            raise
        self.offloads_completed += done

    async def maybe_offload(self) -> Position | None:
        """Apply the size and age triggers; None when they ask for nothing, or
        when another offload is running (which checks them again when done)."""
        if self.offloader is None or not self.config.offload_triggers:
            return None
        head = self.meta.head
        sealed = [
            LedgerSummary(i.ledgerId, i.size, i.timestamp, state.is_offloaded(i))
            for i in head.ledgers if state.is_sealed(head, i)
        ]
        open_size = self._writer.length if self._writer is not None else 0
        boundary = offload_boundary(
            sealed, open_size=open_size, now_ms=self.now_ms(),
            threshold_bytes=self.config.offload_threshold_bytes,
            threshold_seconds=self.config.offload_threshold_seconds,
        )
        if boundary is None:
            return None
        try:
            return await self.offload_prefix(Position(boundary, 0))
        except OffloadInProgress:
            self._trigger_pending = True  # the running offload checks again when done
            return None
