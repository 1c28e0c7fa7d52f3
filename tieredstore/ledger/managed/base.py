"""The state a managed ledger's parts (:mod:`.managed_ledger`) share, set up
once, with the checks every operation starts with and the background tasks
they spawn."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.errors import Fenced
from tieredstore.ledger.errors import (
    ManagedLedgerClosed,
    ManagedLedgerError,
    ManagedLedgerFenced,
    NoOffloader,
)
from tieredstore.ledger.local import LocalLedgerStore, LocalLedgerWriter
from tieredstore.ledger.managed.config import ManagedLedgerConfig
from tieredstore.ledger.managed.meta.metadata import ManagedLedgerMetadata
from tieredstore.ledger.managed.sources import HandleCache, LedgerCopy
from tieredstore.ledger.offload.offloader import LedgerOffloader
from tieredstore.metadata.liveness import Heartbeat
from tieredstore.tasks import Background

log = logging.getLogger(__name__)

MANAGED_LEDGER_KEY = "managed-ledger"
"""The custom metadata entry of a local ledger that names its managed ledger."""


class ManagedLedgerBase:
    """The state of one managed ledger, shared by its parts."""

    def __init__(
        self,
        meta: ManagedLedgerMetadata,
        ledgers: LocalLedgerStore,
        offloader: LedgerOffloader | None,
        config: ManagedLedgerConfig,
        clock: Callable[[], float],
    ) -> None:
        self.meta = meta
        self.ledgers = ledgers
        self.offloader = offloader
        self.config = config
        self.clock = clock
        self._writer: LocalLedgerWriter | None = None
        self._write_lock = asyncio.Lock()  # appends and rollovers
        self._data_lock = asyncio.Lock()  # offloads, local deletions, trims
        self._offloading = False
        self._trigger_pending = False
        self._handles = HandleCache()
        self._not_ours: set[int] = set()  # local ledgers of other managed ledgers
        self._background = Background()  # offloads, the deletion-lag sweep, liveness
        self._heartbeat: Heartbeat | None = None
        self._failed: BaseException | None = None
        self._closed = False
        self.offloads_completed = 0
        self.offloads_failed = 0
        self.reads_by_source: dict[LedgerCopy, int] = {LedgerCopy.LOCAL: 0,
                                                       LedgerCopy.OFFLOADED: 0}

    # --- state --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def current_ledger_id(self) -> int:
        return self._check_writer().ledger_id

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _check_open(self) -> None:
        if self._closed:
            raise ManagedLedgerClosed("closed", name=self.name)
        if self._failed is not None:
            if isinstance(self._failed, Fenced):
                raise ManagedLedgerFenced(f"fenced earlier: {self._failed}", name=self.name)
            raise ManagedLedgerError(f"failed earlier, reopen it: {self._failed}",
                                     name=self.name)
        self.meta.check_writable()

    def _check_writer(self) -> LocalLedgerWriter:
        self._check_open()
        if self._writer is None:
            raise ManagedLedgerError("opened without appending: it has no current ledger",
                                     name=self.name)
        return self._writer

    def _require_offloader(self) -> LedgerOffloader:
        if self.offloader is None:
            raise NoOffloader(f"managed ledger {self.name!r} has no offloader")
        return self.offloader

    async def ledger_infos(self) -> list[pb.LedgerInfo]:
        """Every live ledger's record, oldest first (reads every page)."""
        return [info async for info in self.meta.ledgers()]

    # --- background work ----------------------------------------------------------------

    async def wait_idle(self) -> bool:
        """Wait for background offloads (tests); whether any was under way."""
        return await self._background.wait_idle()
