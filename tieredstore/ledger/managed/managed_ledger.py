"""ManagedLedger: a log of ledgers, offloaded to tiered storage (PIP-17).

Entries are appended to the current ledger of a
:class:`~tieredstore.ledger.local.LocalLedgerStore` and addressed by
:class:`Position` ``(ledger_id, entry_id)``. A ledger is rolled over when it
reaches its size or entry limit. The list of ledgers lives in
:class:`~tieredstore.ledger.managed.metadata.ManagedLedgerMetadata` (a head
and pages in the object store).

Offloading (PIP-17): ``offload_prefix(position)`` offloads every sealed
ledger before ``position``, one at a time, through a
:class:`~tieredstore.ledger.offloader.LedgerOffloader`. For each, the
attempt's uuid is recorded in the metadata *before* the attempt starts; a
previous attempt that did not complete is deleted through its uuid first;
the offload is recorded complete only once its objects are all written (see
:mod:`.attempt`; what a replaced or dead owner leaves unreferenced,
:func:`~tieredstore.ledger.managed.sweep.sweep_offloads` deletes). One
offload runs at a time per managed ledger: a second request meanwhile gets
:class:`~tieredstore.ledger.errors.OffloadInProgress`. ``maybe_offload`` applies
the size and age triggers (after each rollover too, with ``auto_offload``).

The local copy of an offloaded ledger is deleted by
``delete_offloaded_local_copies`` only once the offload is recorded complete
and the deletion lag (4 hours by default) has passed since; after that, the
ledger's record can no longer change and moves to a page. ``trim`` and
``apply_retention`` drop the oldest ledgers (both copies) and move the
``first`` pointer.

Opening a managed ledger whose last ledger was left open (the previous
owner crashed or lost it) recovers that ledger with fencing (seed 004): the
old writer is refused from then on. ``clock`` (seconds since the epoch) is
injectable for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from tieredstore.ledger import managed_ledger_pb2 as pb
from tieredstore.ledger.errors import (
    LedgerFenced,
    LedgerNotFound,
    ManagedLedgerClosed,
    ManagedLedgerError,
    ManagedLedgerFenced,
    NoOffloader,
    OffloadInProgress,
    PositionOutOfRange,
)
from tieredstore.ledger.format import BytesLike
from tieredstore.ledger.handle import LedgerEntry, ReadHandle
from tieredstore.ledger.local import LocalLedgerStore, LocalLedgerWriter
from tieredstore.ledger.managed import state
from tieredstore.ledger.managed.attempt import offload_attempt
from tieredstore.ledger.managed.codec import offload_uuid
from tieredstore.ledger.managed.config import ManagedLedgerConfig
from tieredstore.ledger.managed.keys import ManagedLedgerPath
from tieredstore.ledger.managed.metadata import ManagedLedgerMetadata
from tieredstore.ledger.managed.policy import LedgerSummary, offload_boundary, retention_trims
from tieredstore.ledger.managed.sources import HandleCache, Source, choose_sources
from tieredstore.ledger.offloader import LedgerOffloader
from tieredstore.objectstore.base import ObjectStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where an entry is: its ledger and its id in the ledger."""

    ledger_id: int
    entry_id: int


OPEN_ATTEMPTS = 8


class ManagedLedger:
    """One managed ledger. Open with :meth:`open`; close with :meth:`close`."""

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
        self._tasks: set[asyncio.Task[object]] = set()
        self._failed: BaseException | None = None
        self._closed = False
        self.offloads_completed = 0
        self.offloads_failed = 0
        self.reads_by_source: dict[Source, int] = {Source.LOCAL: 0, Source.OFFLOADED: 0}

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
    ) -> ManagedLedger:
        """Open (or create) the managed ledger ``name``: recover a ledger left
        open (fencing its writer), then start a new current ledger."""
        config = config or ManagedLedgerConfig()
        for attempt in range(OPEN_ATTEMPTS):
            meta = await ManagedLedgerMetadata.open(
                metadata_store, ManagedLedgerPath(root, name), writer_id=writer_id,
                page_size=config.page_size,
            )
            self = cls(meta, ledgers, offloader, config, clock)
            try:
                await self._start()
            except ManagedLedgerFenced:
                # The owner we replace wrote a head since we loaded ours: the newest
                # open does not give up to it. Load again and take over again.
                if attempt == OPEN_ATTEMPTS - 1:
                    raise
                continue
            return self
        raise AssertionError("unreachable")

    # --- state --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def current_ledger_id(self) -> int:
        return self._check_writer().ledger_id

    @property
    def first_ledger_id(self) -> int:
        return self.meta.head.firstLedgerId

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _check_open(self) -> None:
        if self._closed:
            raise ManagedLedgerClosed("closed", name=self.name)
        if self._failed is not None:
            if isinstance(self._failed, LedgerFenced | ManagedLedgerFenced):
                raise ManagedLedgerFenced(f"fenced earlier: {self._failed}", name=self.name)
            raise ManagedLedgerError(f"failed earlier, reopen it: {self._failed}",
                                     name=self.name)
        self.meta.check_writable()

    def _check_writer(self) -> LocalLedgerWriter:
        self._check_open()
        assert self._writer is not None
        return self._writer

    async def ledger_infos(self) -> list[pb.LedgerInfo]:
        """Every live ledger's record, oldest first (reads every page)."""
        return [info async for info in self.meta.ledgers()]

    # --- writing ---------------------------------------------------------------------------

    async def _start(self) -> None:
        open_id = state.open_ledger_id(self.meta.head)
        entries = size = 0
        if open_id is not None:
            handle = await self.ledgers.open_ledger(open_id, recovery=True)
            entries, size = handle.last_add_confirmed + 1, handle.length
            await handle.close()
        writer = await self._new_ledger()
        now = self.now_ms()

        def mutate(head: pb.ManagedLedgerHead) -> pb.LedgerInfo | None:
            dropped = None
            if open_id is not None:
                dropped = state.close_open_ledger(head, entries=entries, size=size,
                                                  timestamp_ms=now)
            state.add_ledger(head, writer.ledger_id)
            return dropped

        await self._commit_rollover(writer, mutate)

    async def _new_ledger(self) -> LocalLedgerWriter:
        c = self.config
        return await self.ledgers.create_ledger(
            ensemble_size=c.ensemble_size, write_quorum_size=c.write_quorum_size,
            ack_quorum_size=c.ack_quorum_size,
            custom_metadata=[("managed-ledger", self.name.encode())],
        )

    async def _commit_rollover(
        self, writer: LocalLedgerWriter,
        mutate: Callable[[pb.ManagedLedgerHead], pb.LedgerInfo | None],
    ) -> None:
        """Record ``writer``'s ledger as current; if that cannot be known to
        have landed, delete the ledger again and fail."""
        try:
            dropped = await self.meta.update(mutate)
        except BaseException as exc:
            try:
                await self.meta.settle()
                settled = True
            except Exception:  # unknown whether the head landed: keep the ledger
                settled = False
            if state.open_ledger_id(self.meta.head) != writer.ledger_id:
                with contextlib.suppress(Exception):
                    await writer.close()
                    if settled:  # known not to be named by any head
                        await self.ledgers.delete_ledger(writer.ledger_id)
                if self._writer is not None:
                    self._failed = exc
                raise
            dropped = None  # it landed; an empty ledger it dropped stays on disk
        self._writer = writer
        if dropped is not None:
            await self.ledgers.delete_ledger(dropped.ledgerId)

    async def add_entry(self, payload: BytesLike) -> Position:
        """Append one entry; its position once it is durable."""
        return (await self.add_entries([payload]))[0]

    async def add_entries(self, payloads: Sequence[BytesLike]) -> list[Position]:
        """Append entries to the current ledger with one write, rolling over
        first if the ledger is full."""
        async with self._write_lock:
            writer = self._check_writer()
            if self._is_full(writer):
                await self._rollover_locked()
                writer = self._check_writer()
            try:
                ids = await writer.append_many(payloads)
            except (LedgerFenced, LedgerNotFound) as exc:
                # Not found: a newer owner dropped it (an empty ledger it recovered).
                self._failed = exc
                raise ManagedLedgerFenced(f"its ledger was fenced: {exc}",
                                          name=self.name) from exc
            return [Position(writer.ledger_id, i) for i in ids]

    def _is_full(self, writer: LocalLedgerWriter) -> bool:
        limit = self.config.max_ledger_bytes
        return writer.last_add_confirmed + 1 >= self.config.max_entries_per_ledger or (
            limit is not None and writer.length >= limit
        )

    async def rollover(self) -> None:
        """Close the current ledger and start a new one (one head write)."""
        async with self._write_lock:
            self._check_writer()
            await self._rollover_locked()

    async def _rollover_locked(self) -> None:
        old = self._check_writer()
        new = await self._new_ledger()
        try:
            await old.close()
        except LedgerFenced as exc:
            with contextlib.suppress(Exception):
                await new.close()
                await self.ledgers.delete_ledger(new.ledger_id)
            self._failed = exc
            raise ManagedLedgerFenced(f"its ledger was fenced: {exc}", name=self.name) from exc
        entries, size, now = old.last_add_confirmed + 1, old.length, self.now_ms()

        def mutate(head: pb.ManagedLedgerHead) -> pb.LedgerInfo | None:
            dropped = state.close_open_ledger(head, entries=entries, size=size, timestamp_ms=now)
            state.add_ledger(head, new.ledger_id)
            return dropped

        await self._commit_rollover(new, mutate)
        if self.config.auto_offload and self.config.offload_triggers and self.offloader:
            self._spawn(self.maybe_offload())

    # --- reading ---------------------------------------------------------------------------

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
            self.reads_by_source[Source.LOCAL] += 1
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
                    handle = await self._open_source(source, info)
                except LedgerNotFound:
                    if i + 1 < len(sources):
                        continue  # the local copy is gone: read the offloaded one
                    raise
                await self._handles.put(source, ledger_id, handle)
            self.reads_by_source[source] += 1
            return handle
        raise ManagedLedgerError(f"ledger {ledger_id} has neither a local nor an "
                                 "offloaded copy", name=self.name)

    async def _open_source(self, source: Source, info: pb.LedgerInfo) -> ReadHandle:
        if source is Source.LOCAL:
            return await self.ledgers.open_ledger(info.ledgerId)
        uuid = offload_uuid(info)
        assert uuid is not None
        return await self._require_offloader().read_offloaded(info.ledgerId, uuid)

    # --- offloading -------------------------------------------------------------------------

    def _require_offloader(self) -> LedgerOffloader:
        if self.offloader is None:
            raise NoOffloader(f"managed ledger {self.name!r} has no offloader")
        return self.offloader

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
                return self._first_not_offloaded()
        finally:
            self._offloading = False
            if self._trigger_pending and not self._closed:
                # A trigger fired while this ran and backed off: check it again.
                self._trigger_pending = False
                self._spawn(self.maybe_offload())

    def _first_not_offloaded(self) -> Position:
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
                await self._handles.drop(ledger_id, Source.LOCAL)
                await self.ledgers.delete_ledger(ledger_id)
            if due:
                await self.meta.update(lambda h: state.mark_local_deleted(h, due))
            return due

    # --- trimming ----------------------------------------------------------------------------

    async def trim(self, before_ledger_id: int) -> int:
        """Drop every ledger with a smaller id (never the current one): their
        local and offloaded copies, then their records. Returns the new first
        ledger id."""
        self._check_open()
        async with self._data_lock:
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

    # --- lifecycle -----------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        async def run() -> None:
            try:
                await coro
            except Exception as exc:
                log.warning("%s: background offload failed: %s", self.name, exc)

        task: asyncio.Task[object] = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait_idle(self) -> None:
        """Wait for background offloads (tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        """Wait for background work, close the handles and the current ledger.

        The metadata still shows the current ledger open: the next open
        recovers it (it is closed already, so nothing is fenced)."""
        if self._closed:
            return
        await self.wait_idle()
        self._closed = True
        await self._handles.close()
        if self._writer is not None:
            # Fenced, or dropped (empty) by a newer owner: nothing left to close.
            with contextlib.suppress(LedgerFenced, LedgerNotFound):
                await self._writer.close()
