"""How a managed ledger's head changes. Pure: no IO.

Every function works on a :class:`pb.ManagedLedgerHead` the caller owns (a
copy of the committed head), never on the committed one, and raises
:class:`ValueError` for a change that does not apply (the head stays as the
caller may then drop it).

The head's ``ledgers`` are the ledgers not in a page, oldest first; the last
is the ledger being written when ``lastLedgerOpen``. A ledger moves to a page
once nothing about it can change (seed 001): closed, offloaded
(``complete``) and its local copy deleted (``bookkeeperDeleted``). Pages are
cut ``pageSize`` ledgers at a time from the front of ``ledgers``, so every
writer cuts the same pages.
"""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Iterable, Mapping, Sequence

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.ledger.managed.meta.format import offload_uuid, uuid_to_bits


def copy_info(info: pb.LedgerInfo) -> pb.LedgerInfo:
    out = pb.LedgerInfo()
    out.CopyFrom(info)
    return out


def find(head: pb.ManagedLedgerHead, ledger_id: int) -> pb.LedgerInfo | None:
    """The ledger's record among the head's (not paged) ledgers."""
    for info in head.ledgers:
        if info.ledgerId == ledger_id:
            return info
    return None


def open_ledger_id(head: pb.ManagedLedgerHead) -> int | None:
    return head.ledgers[-1].ledgerId if head.lastLedgerOpen and head.ledgers else None


def last_ledger_id(head: pb.ManagedLedgerHead) -> int:
    """The largest ledger id ever recorded (-1 before the first)."""
    if head.ledgers:
        return head.ledgers[-1].ledgerId
    return head.pagedThrough - 1 if head.HasField("pagedThrough") else -1


def is_sealed(head: pb.ManagedLedgerHead, info: pb.LedgerInfo) -> bool:
    return info.ledgerId != open_ledger_id(head)


def is_offloaded(info: pb.LedgerInfo) -> bool:
    return info.HasField("offloadContext") and info.offloadContext.complete


def is_pageable(head: pb.ManagedLedgerHead, info: pb.LedgerInfo) -> bool:
    """Closed, offloaded and locally deleted: immutable from now on."""
    return (
        is_sealed(head, info)
        and is_offloaded(info)
        and info.offloadContext.bookkeeperDeleted
    )


# --- rollover -----------------------------------------------------------------------


def add_ledger(head: pb.ManagedLedgerHead, ledger_id: int) -> None:
    """Record a new ledger as the one being written."""
    if head.lastLedgerOpen:
        raise ValueError(f"ledger {head.ledgers[-1].ledgerId} is still open")
    if ledger_id <= last_ledger_id(head) or ledger_id < head.firstLedgerId:
        raise ValueError(
            f"ledger {ledger_id} does not come after ledger {last_ledger_id(head)}"
        )
    head.ledgers.add(ledgerId=ledger_id)
    head.lastLedgerOpen = True


def close_open_ledger(head: pb.ManagedLedgerHead, *, entries: int, size: int,
                      timestamp_ms: int) -> pb.LedgerInfo | None:
    """Record the open ledger as closed with its entries and size. An empty
    one is dropped instead (as Pulsar does): its record is returned, for the
    caller to delete the ledger itself."""
    ledger_id = open_ledger_id(head)
    if ledger_id is None:
        raise ValueError("no ledger is open")
    head.lastLedgerOpen = False
    if entries == 0:
        dropped = copy_info(head.ledgers[-1])
        del head.ledgers[-1]
        return dropped
    info = head.ledgers[-1]
    info.entries = entries
    info.size = size
    info.timestamp = timestamp_ms
    return None


# --- offload ------------------------------------------------------------------------


def begin_offload(
    head: pb.ManagedLedgerHead,
    ledger_id: int,
    uuid: uuid_mod.UUID,
    driver_name: str,
    driver_metadata: Mapping[str, str],
) -> None:
    """Record the uuid of an attempt before it starts (PIP-17)."""
    info = find(head, ledger_id)
    if info is None or not is_sealed(head, info):
        raise ValueError(f"ledger {ledger_id} is not a sealed ledger of the head")
    if is_offloaded(info):
        raise ValueError(f"ledger {ledger_id} is offloaded already")
    ctx = info.offloadContext
    ctx.Clear()
    ctx.uidMsb, ctx.uidLsb = uuid_to_bits(uuid)
    ctx.complete = False
    ctx.bookkeeperDeleted = False
    ctx.driverMetadata.name = driver_name
    for key, value in sorted(driver_metadata.items()):
        ctx.driverMetadata.properties.add(key=key, value=value)


def complete_offload(head: pb.ManagedLedgerHead, ledger_id: int, uuid: uuid_mod.UUID,
                     timestamp_ms: int) -> None:
    """Record the attempt ``uuid`` as the ledger's offloaded copy."""
    info = find(head, ledger_id)
    if info is None:
        raise ValueError(f"ledger {ledger_id} is no longer in the head (trimmed?)")
    if offload_uuid(info) != uuid:
        raise ValueError(
            f"ledger {ledger_id}: the recorded attempt is {offload_uuid(info)}, not {uuid}"
        )
    info.offloadContext.complete = True
    info.offloadContext.timestamp = timestamp_ms


def fail_offload(head: pb.ManagedLedgerHead, ledger_id: int, uuid: uuid_mod.UUID,
                 failure: str, failed_at_ms: int) -> None:
    """Record that the attempt ``uuid`` failed (its uuid stays recorded: a
    next attempt deletes whatever it left)."""
    info = find(head, ledger_id)
    if info is None or offload_uuid(info) != uuid or info.offloadContext.complete:
        return  # trimmed, replaced, or completed meanwhile: nothing to record
    info.offloadContext.failure = failure[:FAILURE_LIMIT]
    info.offloadContext.failedAt = failed_at_ms


FAILURE_LIMIT = 500
"""A recorded failure message is cut to this many characters."""


def offload_state(info: pb.LedgerInfo) -> str:
    """``none`` (no attempt recorded), ``in progress`` (recorded, not complete,
    no failure recorded: running, or its owner died), ``failed`` or ``complete``."""
    if offload_uuid(info) is None:
        return "none"
    if info.offloadContext.complete:
        return "complete"
    return "failed" if info.offloadContext.HasField("failure") else "in progress"


def mark_local_deleted(head: pb.ManagedLedgerHead, ledger_ids: Iterable[int]) -> None:
    for ledger_id in ledger_ids:
        info = find(head, ledger_id)
        if info is not None and is_offloaded(info):
            info.offloadContext.bookkeeperDeleted = True


def local_copy_gone(head: pb.ManagedLedgerHead, ledger_id: int) -> bool:
    """Whether ``head`` says no owner needs the local copy of this managed
    ledger's ledger ``ledger_id`` any more: trimmed (below ``firstLedgerId``),
    paged (a paged ledger's local copy is deleted), marked deleted, or named by
    no record though older than the newest recorded ledger (a rollover whose
    head did not land, an empty ledger dropped). A ledger newer than the newest
    recorded one may be a rollover's whose head write is under way: not gone.
    Every later head says the same of it (the pointers only grow, the mark
    stays, ids are never given twice)."""
    if ledger_id < head.firstLedgerId or ledger_id < head.pagedThrough:
        return True
    info = find(head, ledger_id)
    if info is None:
        return ledger_id < last_ledger_id(head)
    return is_offloaded(info) and info.offloadContext.bookkeeperDeleted


# --- paging and trimming -----------------------------------------------------------------


def cut_pages(head: pb.ManagedLedgerHead) -> list[list[pb.LedgerInfo]]:
    """Move every full page of immutable ledgers from the front of the head's
    ledgers out; return their records, oldest first, for the caller to
    write (and chain) before the head."""
    pages: list[list[pb.LedgerInfo]] = []
    size = head.pageSize
    while len(head.ledgers) >= size and all(
        is_pageable(head, info) for info in head.ledgers[:size]
    ):
        page = [copy_info(info) for info in head.ledgers[:size]]
        del head.ledgers[:size]
        head.pagedThrough = page[-1].ledgerId + 1
        head.pagedEntries += sum(i.entries for i in page)
        head.pagedSize += sum(i.size for i in page)
        head.pagedLedgers += len(page)
        head.pagesWritten += 1
        pages.append(page)
    return pages


def trim(head: pb.ManagedLedgerHead, before_ledger_id: int,
         trimmed_paged: Sequence[pb.LedgerInfo]) -> list[pb.LedgerInfo]:
    """Move ``firstLedgerId`` to ``before_ledger_id``: every ledger with a
    smaller id is gone. ``trimmed_paged`` are the live paged ledgers it
    drops (their totals leave the head's). Returns the head ledgers dropped."""
    open_id = open_ledger_id(head)
    if open_id is not None and before_ledger_id > open_id:
        raise ValueError(f"cannot trim past the open ledger {open_id}")
    if before_ledger_id <= head.firstLedgerId:
        return []
    head.firstLedgerId = before_ledger_id
    dropped = [copy_info(i) for i in head.ledgers if i.ledgerId < before_ledger_id]
    kept = [copy_info(i) for i in head.ledgers if i.ledgerId >= before_ledger_id]
    del head.ledgers[:]
    head.ledgers.extend(kept)
    head.pagedEntries -= sum(i.entries for i in trimmed_paged)
    head.pagedSize -= sum(i.size for i in trimmed_paged)
    head.pagedLedgers -= len(trimmed_paged)
    return dropped
