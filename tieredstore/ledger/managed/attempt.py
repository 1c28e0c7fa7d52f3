"""One offload attempt of one ledger, as PIP-17 orders it.

1. A previous attempt that did not complete is deleted through its uuid (a
   failure here stops before anything new is written).
2. A new uuid is recorded in the metadata, before anything is written under it.
3. The offloader copies the ledger; if that fails its objects are deleted
   at once (best effort: if that fails too, step 1 of the next attempt does it).
4. The offload is recorded complete. If that head write fails it may still
   have landed: the metadata finds out (:meth:`ManagedLedgerMetadata.settle`).
   Only if it did not land are the objects deleted; if the answer cannot be
   had, or another writer took the managed ledger over, they stay under the
   recorded uuid for the next attempt to delete.
"""

from __future__ import annotations

import contextlib
import uuid as uuid_mod
from collections.abc import Callable, Mapping

from tieredstore.ledger.local import LocalLedgerStore
from tieredstore.ledger.managed import state
from tieredstore.ledger.managed.codec import offload_uuid
from tieredstore.ledger.managed.metadata import ManagedLedgerMetadata
from tieredstore.ledger.offloader import LedgerOffloader


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
    except BaseException:
        with contextlib.suppress(Exception):
            await offloader.delete_offloaded(ledger_id, uuid)
        raise
    now = now_ms()
    try:
        await meta.update(lambda head: state.complete_offload(head, ledger_id, uuid, now))
    except BaseException:
        if await _landed(meta, ledger_id, uuid):
            return True
        if not meta.fenced:
            with contextlib.suppress(Exception):
                await offloader.delete_offloaded(ledger_id, uuid)
        raise
    return True


async def _landed(meta: ManagedLedgerMetadata, ledger_id: int, uuid: uuid_mod.UUID) -> bool:
    """Whether the head that records ``uuid`` complete landed after all."""
    try:
        await meta.settle()
    except Exception:
        return False  # unknown: leave the objects to the next attempt
    recorded = state.find(meta.head, ledger_id)
    return recorded is not None and state.is_offloaded(recorded) and \
        offload_uuid(recorded) == uuid
