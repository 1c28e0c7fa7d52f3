"""One managed ledger's metadata in the object store: a mutable head, immutable pages.

Seed 001's split of Pulsar's ``ManagedLedgerInfo``. The head holds the
ledgers that can still change (the open one, sealed ones not yet offloaded,
offloaded ones whose local copy is not deleted yet) plus the ``first``
pointer and running totals; ledgers that can no longer change move, a page
of ``page_size`` at a time, into page objects written once. So a rollover
writes one head of bounded size, whatever the history; trimming moves
``firstLedgerId`` in the head and then deletes the pages wholly behind it.

Why not :class:`tieredstore.metadata.QueueMetadata`: its records are
immutable from the moment they are appended and are paged by count from the
tail, while a ledger record changes after it is appended (closed, then its
offload context: uuid, complete, local copy deleted) and may only be paged
once it stops changing. The approach is the same (head CAS by
``If-None-Match`` on ``head-{version}``, a listing after each write, pages
chained by hashes in their keys, the same framing and page digest); this
module reuses :mod:`tieredstore.metadata.format`'s framing and digest, and
its versioned heads (:func:`head_versions`) and head writer
(:mod:`tieredstore.metadata.headwriter`: lock, settle, stamp and publish,
pages written once, page cache) over its own head message.

Methods are safe to call concurrently from one event loop: writes are
serialized, reads see the last committed head. The head returned by
:attr:`head` is the committed one: read it, never change it.
"""

from __future__ import annotations

import bisect
import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.ledger.errors import (
    CorruptManagedLedger,
    ManagedLedgerError,
    ManagedLedgerFenced,
)
from tieredstore.ledger.managed.meta.format import (
    FORMAT_VERSION,
    build_page,
    decode_head,
    decode_page,
    encode_head,
    stamp_head,
)
from tieredstore.ledger.managed.meta.keys import LedgerPageRef, ManagedLedgerPath
from tieredstore.ledger.managed.meta.state import copy_info, cut_pages, find
from tieredstore.ledger.managed.meta.state import trim as trim_head
from tieredstore.metadata.headwriter import HeadWriter, NewPage
from tieredstore.metadata.pages import PageSet
from tieredstore.metadata.versions import VersionedHeads
from tieredstore.objectstore.base import ObjectStore

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 64
MAX_PAGE_SIZE = 10_000
_SERIES = 0  # a managed ledger has one series of pages


def head_versions(store: ObjectStore, path: ManagedLedgerPath
                  ) -> VersionedHeads[pb.ManagedLedgerHead]:
    """The versions of the managed ledger's head: the same compare-and-swap as
    queue heads (:mod:`tieredstore.metadata.versions`), over our own head message."""
    return VersionedHeads(
        store, path,
        decode=lambda data, key, version: decode_head(data, key, version, name=path.name),
        fenced=lambda message: ManagedLedgerFenced(message, name=path.name),
        error=lambda message: ManagedLedgerError(message, name=path.name),
        corrupt=CorruptManagedLedger,
    )


async def list_managed_ledgers(store: ObjectStore, root: str) -> list[ManagedLedgerPath]:
    """Every managed ledger with metadata under ``root`` (each key under
    ``{root}/ml/``, by its name), in name order; one paged listing. Raises
    :class:`CorruptManagedLedger` for a key there that no managed ledger's
    name encodes to."""
    base = f"{root}/ml/" if root else "ml/"
    found = sorted({info.key[len(base):].split("/", 1)[0]
                    for info in await store.list_all(base)})
    paths = []
    for encoded in found:
        path = ManagedLedgerPath(root, urllib.parse.unquote(encoded))
        if path.encoded_name != encoded:
            raise CorruptManagedLedger(f"{base}{encoded}/ is not a managed ledger's metadata")
        paths.append(path)
    return sorted(paths, key=lambda p: p.name)


class ManagedLedgerMetadata(HeadWriter[pb.ManagedLedgerHead, pb.LedgerInfo, LedgerPageRef]):
    """The metadata of one managed ledger. Open with :meth:`open`."""

    def __init__(
        self,
        store: ObjectStore,
        path: ManagedLedgerPath,
        head: pb.ManagedLedgerHead,
        version: int,
        *,
        writer_id: str,
        cache_pages: int = 8,
    ) -> None:
        super().__init__(
            head_versions(store, path), head, version, writer_id=writer_id,
            stamp=stamp_head, session_of=lambda head: head.sessionId, encode=encode_head,
            corrupt=lambda message: CorruptManagedLedger(message, name=path.name),
            span=lambda ref: (ref.first_ledger, ref.last_ledger + 1), cache_pages=cache_pages,
        )
        self.path = path

    @classmethod
    async def open(
        cls,
        store: ObjectStore,
        path: ManagedLedgerPath,
        *,
        writer_id: str = "",
        page_size: int = DEFAULT_PAGE_SIZE,
        cache_pages: int = 8,
    ) -> ManagedLedgerMetadata:
        """Load the newest head, or start a new managed ledger (written on the
        first update). ``page_size`` applies to a new one only."""
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be in 1..{MAX_PAGE_SIZE}, got {page_size}")
        loaded = await head_versions(store, path).load()
        if loaded is None:
            version, head = 0, pb.ManagedLedgerHead(
                formatVersion=FORMAT_VERSION, pageSize=page_size, firstLedgerId=0,
                pagedThrough=0,
            )
        else:
            version, head = loaded
        return cls(store, path, head, version, writer_id=writer_id, cache_pages=cache_pages)

    # --- state --------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def head(self) -> pb.ManagedLedgerHead:
        """The committed head (do not change it)."""
        return self._head

    # --- writing ------------------------------------------------------------------

    async def update(self, mutate: Callable[[pb.ManagedLedgerHead], T]) -> T:
        """Apply ``mutate`` to a copy of the head and commit it as the next
        version, with any pages it fills. ``mutate`` raising writes nothing.

        After a failure the outcome may be unknown; the next update (or
        :meth:`settle`) finds out first.
        """
        async with self._write_lock:
            await self._begin_write()
            head = pb.ManagedLedgerHead()
            head.CopyFrom(self._head)
            result = mutate(head)
            await self._commit(head)
            return result

    async def update_settled(self, mutate: Callable[[pb.ManagedLedgerHead], object], *,
                             landed: Callable[[pb.ManagedLedgerHead], bool]) -> None:
        """:meth:`update`, for a write that deletes come after: if it fails, find
        out at once whether it landed (:meth:`settle`). It returns as if answered
        when the newest head is ours and ``landed(head)`` holds of it; else the
        write's error is raised (fenced, not landed, or not known: then the next
        write settles it). So a caller that deletes what the head drops once this
        returns deletes only what a head that stands no longer needs."""
        try:
            await self.update(mutate)
        except Exception:
            if not self.fenced:
                with contextlib.suppress(Exception):
                    await self.settle()
            if self.fenced or self._heads.unsettled or not landed(self._head):
                raise

    async def settle(self) -> None:
        """Find out whether a failed head write landed (adopting it if it did)."""
        async with self._write_lock:
            if self._heads.unsettled:
                await self._settle()

    async def _commit(self, head: pb.ManagedLedgerHead) -> None:
        """Page out the ledgers that stopped changing, then write ``head``."""
        pages: list[NewPage[LedgerPageRef, pb.LedgerInfo]] = []
        for records in cut_pages(head):
            ref, data = build_page(self.path, records, head.lastPageHash)
            head.lastPageHash = ref.page_hash
            pages.append(NewPage(_SERIES, ref, records, data))
        await self._commit_pages(head, pages)

    # --- reading --------------------------------------------------------------------

    async def ledger(self, ledger_id: int) -> pb.LedgerInfo | None:
        """The live ledger's record (a copy), from the head or its page."""
        head = self._head
        if ledger_id < head.firstLedgerId:
            return None
        if ledger_id >= head.pagedThrough:
            info = find(head, ledger_id)
            return copy_info(info) if info is not None else None
        view = await self.page_view()
        i = bisect.bisect_right([r.first_ledger for r in view], ledger_id) - 1
        if i < 0 or ledger_id > view[i].last_ledger:
            return None
        for info in await self.read_page(view[i]):
            if info.ledgerId == ledger_id:
                return copy_info(info)
        return None

    async def ledgers(self, *, before: int | None = None) -> AsyncIterator[pb.LedgerInfo]:
        """Live ledgers oldest first (copies), paged ones first; pages are read
        one at a time as the iteration reaches them. Stops at ``before``."""
        head = self._head
        first = head.firstLedgerId
        if head.pagedThrough > first:
            for ref in await self.page_view():
                if before is not None and ref.first_ledger >= before:
                    return
                for info in await self.read_page(ref):
                    if before is not None and info.ledgerId >= before:
                        return
                    if info.ledgerId >= first:
                        yield copy_info(info)
        for info in list(head.ledgers):
            if before is not None and info.ledgerId >= before:
                return
            yield copy_info(info)

    async def page_view(self) -> list[LedgerPageRef]:
        """The live pages the head references, oldest first."""
        head = self._head
        chain = (await self._pages()).chain(head.lastPageHash, head.firstLedgerId)
        if sum(r.count for r in chain) < head.pagedLedgers:
            raise CorruptManagedLedger(
                f"the head counts {head.pagedLedgers} paged ledgers, but the chain of pages "
                f"from {head.lastPageHash:016x} holds {sum(r.count for r in chain)}: "
                "a page is missing",
                name=self.name,
            )
        return chain

    async def read_page(self, ref: LedgerPageRef) -> tuple[pb.LedgerInfo, ...]:
        return await self._page_records(
            ref.key, lambda data: decode_page(data, ref, name=self.name))

    async def _pages(self) -> PageSet[LedgerPageRef]:
        return await self._listed_pages(_SERIES, self.path.pages_prefix, self.path.parse_page_key)

    # --- trimming ---------------------------------------------------------------------

    async def trim(self, before_ledger_id: int) -> list[pb.LedgerInfo]:
        """Move ``firstLedgerId`` to ``before_ledger_id`` (one head write, its lost
        reply settled: :meth:`update_settled`), then delete the pages wholly
        behind it. Returns the ledgers dropped (paged and head), for the caller
        to delete their data: only now, after the head that drops them stands."""
        if self._head.firstLedgerId >= before_ledger_id:
            return []
        dropped = [info async for info in self.ledgers(before=before_ledger_id)]
        paged = [info for info in dropped if info.ledgerId < self._head.pagedThrough]

        def mutate(head: pb.ManagedLedgerHead) -> None:
            if head.firstLedgerId < before_ledger_id:
                trim_head(head, before_ledger_id, paged)

        await self.update_settled(
            mutate, landed=lambda head: head.firstLedgerId >= before_ledger_id)
        await self.delete_dead_pages()
        return dropped

    async def delete_dead_pages(self) -> int:
        """Delete every page whose ledgers are all before ``firstLedgerId``."""
        pages = await self._pages()
        return await self._drop_pages(
            pages, [r.key for r in pages.dead(self._head.firstLedgerId)])

    def check_writable(self) -> None:
        self._check_writable()

    async def check_current(self) -> None:
        """Fenced (for good) if a head newer than ours exists: another owner
        took the managed ledger over. One LIST (after settling a write of ours
        whose answer was lost, if one was), as after each head write."""
        async with self._write_lock:
            await self._begin_write()
            await self._heads.confirm(self._version)
