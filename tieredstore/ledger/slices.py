"""Offloaded ledgers read in slices: which attempts to read, and the read of one.

:func:`plan_ledger_slices` reads the managed-ledger metadata under the
``ledger_root`` (:func:`~tieredstore.ledger.managed.recorded_offloads`, as the
offload sweep does), lists the offload namespace once (paged) and keeps the
attempts whose index is there and that the metadata records complete: an
attempt it does not record (given up, or a replaced owner's) or not yet
complete is never read, so each ledger is read from one attempt. Where no
managed ledger has metadata under the root (offloads written by a bare
offloader), every complete attempt is read, and a ledger with two complete
attempts is refused, naming it: nothing says which is the offload. With
``ledger_ids`` selected it never reads another ledger's offload objects (the
id is in every key). It then reads each kept index (one GET: the PIP-17 block
table, the ledger's metadata, and the managed ledger's name from the object's
user metadata) and cuts the selected entries into slices of
``blocks_per_slice`` blocks, leaving out blocks the entry range does not
reach. :func:`read_ledger_slice` opens the attempt as ``read_offloaded`` does
(:func:`~tieredstore.ledger.offload.offloader.open_offloaded`: its index) and reads
its entries. An
attempt without its data object (an offload that did not finish) is left out
when planning; one whose objects vanish before its slice is read (deleted
after the deletion lag) fails the read, naming it. The Spark source
``tieredstore-ledger`` is planned and read with these.
"""

from __future__ import annotations

import dataclasses
import uuid as uuid_mod
from collections.abc import AsyncIterator
from dataclasses import dataclass

from tieredstore.errors import ObjectNotFound
from tieredstore.ledger.errors import OffloadError
from tieredstore.ledger.handle import LedgerEntry
from tieredstore.ledger.index import OffloadIndex
from tieredstore.ledger.managed import recorded_offloads
from tieredstore.ledger.offload.location import OffloadNamespace
from tieredstore.ledger.offload.offloader import open_offloaded
from tieredstore.objectstore import ObjectStore
from tieredstore.tasks import gather_bounded

MANAGED_LEDGER_KEY = "managedledgername"  # Pulsar's ManagedLedgerName, lowercased by S3
READ_CONCURRENCY = 16
ENTRIES_PER_READ = 256


@dataclass(frozen=True, slots=True)
class LedgerSelection:
    """Which entries: ledger ids and managed ledger names (None: all), entry ids
    ``[entry_from, entry_to)``."""

    ledger_ids: frozenset[int] | None = None
    managed_ledgers: frozenset[str] | None = None
    entry_from: int = 0
    entry_to: int | None = None


@dataclass(frozen=True, slots=True)
class LedgerSlice:
    """Entries ``first..last`` of one offload attempt (plain values, for a task)."""

    prefix: str
    managed_ledger: str | None
    ledger_id: int
    offload_uuid: str
    first: int
    last: int

    @property
    def space(self) -> OffloadNamespace:
        return OffloadNamespace(self.prefix)


async def plan_ledger_slices(store: ObjectStore, space: OffloadNamespace,
                             selection: LedgerSelection, *, root: str = "managed-ledgers",
                             blocks_per_slice: int = 1) -> list[LedgerSlice]:
    """The slices to read, by ledger id, attempt and entry id: of the attempts
    the managed-ledger metadata under ``root`` records complete; where no
    managed ledger has metadata there, of every complete attempt, and a ledger
    with two of them is refused (:class:`OffloadError` naming it)."""
    recorded = await recorded_offloads(store, root)
    attempts = [a async for a in _attempts(store, space, selection)
                if recorded is None or recorded.get(a[:2], False)]
    async def one(ledger_id: int, uuid: uuid_mod.UUID) -> list[LedgerSlice] | None:
        """None: not complete, or not selected."""
        where = space.locate(ledger_id, uuid)
        try:
            got = await store.get_object(where.index_key)
            await store.head(where.data_key)
        except ObjectNotFound:
            return None  # an offload that did not finish, or deleted meanwhile
        name = got.info.metadata.get(MANAGED_LEDGER_KEY)
        if selection.managed_ledgers is not None and name not in selection.managed_ledgers:
            return None
        return _slices(OffloadIndex.decode(got.data), selection, blocks_per_slice,
                       LedgerSlice(space.prefix, name, ledger_id, str(uuid), 0, -1))

    found = await gather_bounded(READ_CONCURRENCY, lambda a: one(*a), attempts)
    kept = [(a, slices) for a, slices in zip(attempts, found, strict=True) if slices is not None]
    if recorded is None:
        _one_attempt_each([a[:2] for a, _ in kept], root)
    return [s for _, slices in kept for s in slices]


def _one_attempt_each(attempts: list[tuple[int, uuid_mod.UUID]], root: str) -> None:
    """Without metadata nothing says which of two complete attempts of a ledger
    is the offload: refuse rather than read its entries twice."""
    by_ledger: dict[int, list[str]] = {}
    for ledger_id, uuid in attempts:
        by_ledger.setdefault(ledger_id, []).append(str(uuid))
    for ledger_id, uuids in sorted(by_ledger.items()):
        if len(uuids) > 1:
            raise OffloadError(
                f"{len(uuids)} complete offload attempts ({', '.join(sorted(uuids))}) and no "
                f"managed-ledger metadata under {root!r} to say which one is recorded: "
                "refusing to read the ledger more than once (select other ledgers with "
                "'ledger_id', or delete the attempts that are not the offload)",
                ledger_id=ledger_id)


async def _attempts(store: ObjectStore, space: OffloadNamespace, selection: LedgerSelection
                    ) -> AsyncIterator[tuple[int, uuid_mod.UUID]]:
    """Attempts of the namespace with an index object, in key order."""
    async for page in store.list_pages(space.list_prefix):
        for info in page:
            where = space.attempt_of(info.key)
            if where is None or info.key != where.index_key:
                continue
            if selection.ledger_ids is None or where.ledger_id in selection.ledger_ids:
                yield where.ledger_id, where.uuid


def _slices(index: OffloadIndex, selection: LedgerSelection, per_slice: int,
            like: LedgerSlice) -> list[LedgerSlice]:
    last = index.last_entry_id
    if selection.entry_to is not None:
        last = min(last, selection.entry_to - 1)
    firsts = [b.first_entry_id for b in index.entries]
    ends = [*(f - 1 for f in firsts[1:]), index.last_entry_id]
    out: list[LedgerSlice] = []
    for i in range(0, len(firsts), max(1, per_slice)):
        lo = max(firsts[i], selection.entry_from)
        hi = min(ends[min(len(ends), i + per_slice) - 1], last)
        if lo <= hi:
            out.append(dataclasses.replace(like, first=lo, last=hi))
    return out


async def read_ledger_slice(store: ObjectStore, part: LedgerSlice
                            ) -> AsyncIterator[list[LedgerEntry]]:
    """The slice's entries, a few hundred at a time."""
    where = part.space.locate(part.ledger_id, part.offload_uuid)
    handle = await open_offloaded(store, where)
    try:
        for first in range(part.first, part.last + 1, ENTRIES_PER_READ):
            yield await handle.read(first, min(part.last, first + ENTRIES_PER_READ - 1))
    finally:
        await handle.close()
