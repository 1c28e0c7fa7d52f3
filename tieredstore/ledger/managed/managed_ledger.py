"""ManagedLedger: a log of ledgers, offloaded to tiered storage (PIP-17).

Entries are appended to the current ledger of a
:class:`~tieredstore.ledger.local.LocalLedgerStore`, which is rolled over
when full. The list of ledgers lives in
:class:`~tieredstore.ledger.managed.meta.metadata.ManagedLedgerMetadata` (a head
and pages in the object store).

The managed ledger is put together from parts over the state they share
(:mod:`.base`), one module each: appending and rollover (:mod:`.appends`),
reading from the copy the read priority picks (:mod:`.reads`), offloading
sealed ledgers on request or by trigger (:mod:`.offloads`), and deleting
local copies past the deletion lag and trimmed ledgers (:mod:`.deletions`).
This module opens and closes it.

Opening a managed ledger whose last ledger was left open (the previous
owner crashed or lost it) recovers that ledger with fencing (seed 004): the
old writer is refused from then on. ``clock`` (seconds since the epoch) is
injectable for tests.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from tieredstore.ledger.errors import (
    LedgerFenced,
    LedgerNotFound,
    ManagedLedgerError,
    ManagedLedgerFenced,
)
from tieredstore.ledger.local import LocalLedgerStore
from tieredstore.ledger.managed.appends import Appending
from tieredstore.ledger.managed.config import ManagedLedgerConfig
from tieredstore.ledger.managed.deletions import Deleting
from tieredstore.ledger.managed.meta.keys import ManagedLedgerPath
from tieredstore.ledger.managed.meta.metadata import ManagedLedgerMetadata
from tieredstore.ledger.managed.reads import Reading
from tieredstore.ledger.offload.offloader import LedgerOffloader
from tieredstore.metadata import liveness
from tieredstore.metadata.liveness import newest, refuse_if_live
from tieredstore.objectstore.base import ObjectStore
from tieredstore.tasks import Priority

log = logging.getLogger(__name__)

OPEN_ATTEMPTS = 8


class ManagedLedger(Appending, Reading, Deleting):
    """One managed ledger. Open with :meth:`open`; close with :meth:`close`."""

    @classmethod
    async def open(
        cls,
        name: str,
        *,
        metadata_store: ObjectStore,
        ledgers: LocalLedgerStore,
        offloader: LedgerOffloader | None = None,
        config: ManagedLedgerConfig | None = None,
        root: str = "managed-ledgers",
        writer_id: str = "",
        clock: Callable[[], float] = time.time,
        appending: bool = True,
        take_over: bool = True,
    ) -> ManagedLedger:
        """Open (or create) the managed ledger ``name``: recover a ledger left
        open (fencing its writer), then start a new current ledger. With
        ``appending=False`` (an owner that offloads, trims or sweeps only) no
        new ledger is started: the one left open is closed (dropped if empty),
        and appends raise :class:`ManagedLedgerError`; nor is a managed ledger
        created: one without metadata (a misspelt name) is a
        :class:`ManagedLedgerError`, and nothing is written.

        The newest open wins: this one fences the owner it replaces.
        ``take_over=False`` refuses instead, with :class:`WriterLive` naming it,
        while that owner's liveness record is live (docs/writers.md, Liveness
        records); nothing is written then."""
        config = config or ManagedLedgerConfig()
        path = ManagedLedgerPath(root, name)
        if not take_over:
            refuse_if_live(f"managed ledger {name!r}", await newest(metadata_store, path.base))
        for attempt in range(OPEN_ATTEMPTS):
            meta = await ManagedLedgerMetadata.open(
                metadata_store, path, writer_id=writer_id,
                page_size=config.page_size,
            )
            if not appending and meta.version == 0:
                raise ManagedLedgerError("no such managed ledger", name=name)
            self = cls(meta, ledgers, offloader, config, clock)
            try:
                await self._start(appending)
            except ManagedLedgerFenced:
                # The owner we replace wrote a head since we loaded ours: the newest
                # open does not give up to it. Load again and take over again.
                if attempt == OPEN_ATTEMPTS - 1:
                    raise
                continue
            await self._start_heartbeat(metadata_store, path, writer_id)
            if config.sweep_interval_seconds > 0:
                self._background.every(config.sweep_interval_seconds,
                                       f"{name}: deleting local copies past the lag",
                                       self._sweep, priority=Priority.GC)
            return self
        raise AssertionError("unreachable")

    async def _start_heartbeat(self, store: ObjectStore, path: ManagedLedgerPath,
                               writer_id: str) -> None:
        """This owner's liveness record, after the take-over."""
        interval = self.config.heartbeat_interval_seconds
        self._heartbeat = await liveness.start(store, path.base,
                                               writer_id or "managed-ledger owner", interval)
        if interval > 0:
            self._background.every(interval, f"{self.name}: liveness record",
                                   self._heartbeat.beat)

    async def _sweep(self) -> bool:
        """One pass of the deletion-lag sweep; False once closed or fenced."""
        try:
            deleted = await self.delete_offloaded_local_copies()
        except ManagedLedgerError:
            return False  # closed, fenced (replaced) or failed: its owner's business now
        if deleted:
            log.info("%s: deleted the local copies of offloaded ledgers %s", self.name, deleted)
        return True

    async def close(self) -> None:
        """Wait for background work, close the handles and the current ledger.

        The metadata still shows the current ledger open: the next open
        recovers it (it is closed already, so nothing is fenced)."""
        if self._closed:
            return
        await self._background.close()  # the sweep first, then the offloads
        self._closed = True
        if self._heartbeat is not None:
            await self._heartbeat.close()
        await self._handles.close()
        if self._writer is not None:
            # Fenced, or dropped (empty) by a newer owner: nothing left to close.
            with contextlib.suppress(LedgerFenced, LedgerNotFound):
                await self._writer.close()
