"""Which copy of a ledger a read goes to, and the read handles kept open.

A sealed ledger may have a local copy (until the deletion lag has passed
after its offload) and an offloaded one (once its offload is recorded
complete). ``tiered-storage-first`` reads the offloaded copy whenever there
is one; ``bookkeeper-first`` reads the local copy while it exists (Pulsar's
``OffloadedReadPriority``). Pure choice, plus a small LRU of open handles.
"""

from __future__ import annotations

import contextlib
import enum
import logging

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.ledger.errors import NoOffloader
from tieredstore.ledger.handle import ReadHandle
from tieredstore.ledger.local import LocalLedgerStore
from tieredstore.ledger.managed.config import ReadPriority
from tieredstore.ledger.managed.meta.format import offload_uuid
from tieredstore.ledger.managed.meta.state import is_offloaded
from tieredstore.ledger.offload.offloader import LedgerOffloader
from tieredstore.lru import LRU

log = logging.getLogger(__name__)


class LedgerCopy(enum.Enum):
    """A copy of a sealed ledger that a read can go to."""

    LOCAL = "local"
    OFFLOADED = "offloaded"


def local_copy_exists(info: pb.LedgerInfo) -> bool:
    return not (is_offloaded(info) and info.offloadContext.bookkeeperDeleted)


def choose_sources(info: pb.LedgerInfo, priority: ReadPriority) -> list[LedgerCopy]:
    """The copies to try, in order (the second is the fallback)."""
    sources = []
    if is_offloaded(info):
        sources.append(LedgerCopy.OFFLOADED)
    if local_copy_exists(info):
        if priority is ReadPriority.BOOKKEEPER_FIRST:
            sources.insert(0, LedgerCopy.LOCAL)
        else:
            sources.append(LedgerCopy.LOCAL)
    return sources


async def open_copy(source: LedgerCopy, info: pb.LedgerInfo, ledgers: LocalLedgerStore,
                    offloader: LedgerOffloader | None) -> ReadHandle:
    """A new handle on the ``source`` copy of the sealed ledger ``info``."""
    if source is LedgerCopy.LOCAL:
        return await ledgers.open_ledger(info.ledgerId)
    uuid = offload_uuid(info)
    if offloader is None or uuid is None:
        raise NoOffloader("no offloader to read the offloaded copy", ledger_id=info.ledgerId)
    return await offloader.read_offloaded(info.ledgerId, uuid)


class HandleCache:
    """Open read handles by (source, ledger id), the least recently used
    closed when more than ``capacity`` are open."""

    def __init__(self, capacity: int = 16) -> None:
        self._evicted: list[ReadHandle] = []  # to close
        self._handles: LRU[tuple[LedgerCopy, int], ReadHandle] = LRU(
            max(1, capacity), on_evict=lambda _, handle: self._evicted.append(handle))

    def get(self, source: LedgerCopy, ledger_id: int) -> ReadHandle | None:
        return self._handles.get((source, ledger_id))

    async def put(self, source: LedgerCopy, ledger_id: int, handle: ReadHandle) -> None:
        # Held before the old one is closed: a put of the same key while that close
        # awaits then replaces this handle (and closes it), not the other way round.
        old = self._handles.pop((source, ledger_id))
        self._handles.put((source, ledger_id), handle)
        if old is not handle:
            await _close(old)
        while self._evicted:
            await _close(self._evicted.pop())

    async def drop(self, ledger_id: int, source: LedgerCopy | None = None) -> None:
        for key in self._handles:
            if key[1] == ledger_id and (source is None or key[0] is source):
                await _close(self._handles.pop(key))

    async def close(self) -> None:
        for key in self._handles:
            await _close(self._handles.pop(key))

async def _close(handle: ReadHandle | None) -> None:
    if handle is not None:
        with contextlib.suppress(Exception):
            await handle.close()
