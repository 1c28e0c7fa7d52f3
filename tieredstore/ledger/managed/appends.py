"""Appending to a managed ledger: its current ledger, and the rollover to the next.

Entries are appended to the current ledger of a
:class:`~tieredstore.ledger.local.LocalLedgerStore` and addressed by
:class:`~tieredstore.ledger.managed.position.Position` ``(ledger_id,
entry_id)``. A ledger is rolled over when it reaches its size or entry
limit: the next ledger is created, then recorded current in the head (one
head write, which also records the old one closed); with ``auto_offload``
the offload triggers are checked after each rollover.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.ledger.errors import LedgerFenced, LedgerNotFound, ManagedLedgerFenced
from tieredstore.ledger.format import BytesLike
from tieredstore.ledger.local import LocalLedgerWriter
from tieredstore.ledger.managed.base import MANAGED_LEDGER_KEY
from tieredstore.ledger.managed.meta import state
from tieredstore.ledger.managed.offloads import Offloading
from tieredstore.ledger.managed.position import Position
from tieredstore.tasks import Priority


class Appending(Offloading):
    """Appends and rollovers (a rollover may start an offload, hence the base)."""

    async def _start(self, appending: bool = True) -> None:
        """Take over: recover the ledger left open (fencing its writer) and, if
        ``appending``, start a new current ledger in the same head write. An
        owner that does not append (an operator's offload, trim or sweep)
        only closes it, and writes nothing when none is open: it leaves no
        new ledger behind (an empty one is dropped, as Pulsar drops a ledger
        closed empty), so commands run one after another add none."""
        open_id = state.open_ledger_id(self.meta.head)
        closed = None
        if open_id is not None:
            handle = await self.ledgers.open_ledger(open_id, recovery=True)
            closed = handle.last_add_confirmed + 1, handle.length
            await handle.close()
        if appending:
            await self._commit_rollover(await self._new_ledger(), closed)
        elif closed is not None:
            now = self.now_ms()
            dropped = await self.meta.update(lambda head: state.close_open_ledger(
                head, entries=closed[0], size=closed[1], timestamp_ms=now))
            if dropped is not None:
                await self.ledgers.delete_ledger(dropped.ledgerId)

    async def _new_ledger(self) -> LocalLedgerWriter:
        c = self.config
        return await self.ledgers.create_ledger(
            ensemble_size=c.ensemble_size, write_quorum_size=c.write_quorum_size,
            ack_quorum_size=c.ack_quorum_size,
            custom_metadata=[(MANAGED_LEDGER_KEY, self.name.encode())],
        )

    async def _commit_rollover(self, writer: LocalLedgerWriter,
                               closed: tuple[int, int] | None) -> None:
        """Record the open ledger closed with ``closed`` (entries, size; None:
        none is open) and ``writer``'s ledger as current, in one head write; if
        that cannot be known to have landed, delete the ledger again and fail."""
        now = self.now_ms()

        def mutate(head: pb.ManagedLedgerHead) -> pb.LedgerInfo | None:
            dropped = None if closed is None else state.close_open_ledger(
                head, entries=closed[0], size=closed[1], timestamp_ms=now)
            state.add_ledger(head, writer.ledger_id)
            return dropped

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
        """Append entries with one write per ledger they go into: to the current
        ledger up to its entry and size limits, rolling over first if it is full
        and again whenever the batch fills it. If a write fails, the entries of
        the writes before it stay appended (durable, in order)."""
        positions: list[Position] = []
        async with self._write_lock:
            done = 0
            while True:
                writer = self._check_writer()
                if self._is_full(writer):
                    await self._rollover_locked()
                    writer = self._check_writer()
                take = self._room(writer, payloads, done)
                if take == 0 and payloads:  # the next entry would pass the size limit
                    await self._rollover_locked()
                    continue
                try:
                    ids = await writer.append_many(payloads[done:done + take])
                except (LedgerFenced, LedgerNotFound) as exc:
                    # Not found: a newer owner dropped it (an empty ledger it recovered).
                    self._failed = exc
                    raise ManagedLedgerFenced(f"its ledger was fenced: {exc}",
                                              name=self.name) from exc
                positions += [Position(writer.ledger_id, i) for i in ids]
                done += take
                if done >= len(payloads):
                    return positions

    def _room(self, writer: LocalLedgerWriter, payloads: Sequence[BytesLike], start: int) -> int:
        """How many of ``payloads[start:]`` the ledger of ``writer`` (not full) takes:
        up to its entry limit and, with ``max_ledger_bytes``, its size limit; an
        empty ledger takes at least one (an entry larger than the size limit gets
        a ledger of its own)."""
        room = min(len(payloads) - start,
                   self.config.max_entries_per_ledger - (writer.last_add_confirmed + 1))
        limit = self.config.max_ledger_bytes
        if limit is None:
            return room
        size, take = writer.length, 0
        while take < room and (size == 0 or size + len(payloads[start + take]) <= limit):
            size += len(payloads[start + take])
            take += 1
        return take

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
        await self._commit_rollover(new, (old.last_add_confirmed + 1, old.length))
        if self.config.auto_offload and self.config.offload_triggers and self.offloader:
            self._background.spawn(self.maybe_offload(), f"offload of {self.name}",
                                   priority=Priority.OFFLOAD)
