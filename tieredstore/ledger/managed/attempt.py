"""One offload attempt of one ledger, as PIP-17 orders it.

1. A previous attempt that did not complete is deleted through its uuid (a
   failure here stops before anything new is written). A head write of ours
   whose answer was lost is settled first: it may have recorded that attempt
   complete.
2. A new uuid is recorded in the metadata, before anything is written under it.
3. The offloader copies the ledger; if that fails its objects are deleted
   at once (best effort: if that fails too, step 1 of the next attempt does it),
   but only by an owner that still owns the metadata (one LIST of the heads
   says so), and not when the failure says another writer holds the
   attempt's names (``OffloadExists``, ``OffloadFenced``, ``SegmentFenced``):
   what is there is not ours to delete. That owner then records the failure
   (one head write, best effort: ``ledger status`` shows it; a lost reply is
   settled as any head write's, a crash before it leaves the attempt shown in
   progress). An owner that was taken over raises
   :class:`ManagedLedgerFenced` and deletes nothing.
4. The offload is recorded complete. If that head write fails it may still
   have landed: the metadata finds out (:meth:`ManagedLedgerMetadata.settle`).
   Only if it did not land are the objects deleted; if the answer cannot be
   had, they stay under the recorded uuid for the next attempt to delete. An
   owner that was taken over raises :class:`ManagedLedgerFenced` and deletes
   nothing, even if its head landed (on a version the new owner had already
   passed, or under a newer head that may or may not include it).

What a replaced owner leaves is deleted by the new owner's next attempt
through the uuid its head records, or, when the new owner had replaced that
uuid already, by :func:`~tieredstore.ledger.managed.gc.sweep_offloads`.
"""

from __future__ import annotations

import contextlib
import uuid as uuid_mod
from collections.abc import Callable, Mapping

from tieredstore.errors import SegmentFenced
from tieredstore.ledger.errors import ManagedLedgerFenced, OffloadExists, OffloadFenced
from tieredstore.ledger.local import LocalLedgerStore
from tieredstore.ledger.managed.meta import state
from tieredstore.ledger.managed.meta.format import offload_uuid
from tieredstore.ledger.managed.meta.metadata import ManagedLedgerMetadata
from tieredstore.ledger.offload.offloader import LedgerOffloader


async def offload_attempt(
    meta: ManagedLedgerMetadata,
    ledgers: LocalLedgerStore,
    offloader: LedgerOffloader,
    ledger_id: int,
    *,
    extra_metadata: Mapping[str, str],
    now_ms: Callable[[], int],
) -> bool:
    """Offload ``ledger_id`` (a sealed ledger in the head). False if there
    was nothing to do (trimmed, or offloaded already)."""
    # A head write of ours whose answer was lost may have recorded the last
    # attempt complete: find out before its uuid looks like one to delete.
    await meta.settle()
    info = await meta.ledger(ledger_id)
    if info is None or state.is_offloaded(info):
        return False
    previous = offload_uuid(info)
    if previous is not None:
        await offloader.delete_offloaded(ledger_id, previous)
    uuid = uuid_mod.uuid4()
    await meta.update(lambda head: state.begin_offload(
        head, ledger_id, uuid, offloader.driver_name, offloader.driver_metadata))
    try:
        handle = await ledgers.open_ledger(ledger_id)
        try:
            await offloader.offload(handle, uuid, extra_metadata)
        finally:
            await handle.close()
    except Exception as exc:
        owner = await _still_owner(meta)
        if owner is False:
            raise _taken_over(meta, ledger_id, exc) from exc
        if owner and not isinstance(exc, _NAMES_TAKEN):
            with contextlib.suppress(Exception):
                await offloader.delete_offloaded(ledger_id, uuid)
        if owner:
            failure = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                await meta.update(lambda head: state.fail_offload(head, ledger_id, uuid,
                                                                  failure, now_ms()))
        raise
    except BaseException:  # cancelled: no time to ask who owns the metadata
        with contextlib.suppress(Exception):
            await offloader.delete_offloaded(ledger_id, uuid)
        raise
    now = now_ms()
    try:
        await meta.update(lambda head: state.complete_offload(head, ledger_id, uuid, now))
    except BaseException as exc:
        landed = await _landed(meta, ledger_id, uuid)
        if landed:
            return True
        if meta.fenced and isinstance(exc, Exception):
            raise _taken_over(meta, ledger_id, exc) from exc
        if landed is False:
            with contextlib.suppress(Exception):
                await offloader.delete_offloaded(ledger_id, uuid)
        raise
    return True


# The offloader found another writer's objects under the attempt's names.
_NAMES_TAKEN = (OffloadExists, OffloadFenced, SegmentFenced)


async def _still_owner(meta: ManagedLedgerMetadata) -> bool | None:
    """Whether no other owner took the managed ledger over (None: unknown)."""
    try:
        await meta.check_current()
    except ManagedLedgerFenced:
        return False
    except Exception:
        return None
    return True


def _taken_over(meta: ManagedLedgerMetadata, ledger_id: int,
                exc: Exception) -> ManagedLedgerFenced:
    if isinstance(exc, ManagedLedgerFenced):
        return exc
    return ManagedLedgerFenced(f"taken over by another owner while offloading ledger "
                               f"{ledger_id} ({exc}); its attempt is left to the new owner",
                               name=meta.name)


async def _landed(meta: ManagedLedgerMetadata, ledger_id: int,
                  uuid: uuid_mod.UUID) -> bool | None:
    """Whether the head that records ``uuid`` complete landed after all and
    stands: None if that cannot be known (or another owner took over)."""
    try:
        await meta.settle()
    except Exception:
        return None  # unknown: leave the objects to the next attempt
    if meta.fenced:
        # Our head may stand, but a newer owner's head is the metadata now.
        return None
    recorded = state.find(meta.head, ledger_id)
    return recorded is not None and state.is_offloaded(recorded) and \
        offload_uuid(recorded) == uuid
