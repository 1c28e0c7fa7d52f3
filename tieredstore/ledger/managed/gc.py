"""Sweep: offload attempts that no managed ledger references.

An offload attempt ``(ledger_id, uuid)`` is referenced while a managed
ledger's newest metadata (head and pages) records that uuid for that ledger,
complete or not. Owners delete what they stop referencing (a failed attempt
through its recorded uuid, a trimmed ledger's offload), but an owner that was
replaced, or that died, cannot: a zombie may go on writing an attempt whose
uuid the new owner already replaced, and a process that died mid-upload
leaves its multipart upload (or a data object without its index). A sweep finds, in one offload
namespace:

- **unreferenced attempts** (every object and upload of the attempt older
  than the safety age), deleted whole: the index and the data object, then
  the uploads under the data key;
- in a referenced attempt whose data object stands, **multipart uploads**
  under its data key older than the safety age: what another writer of the
  same names (the same uuid) left after the owner's write.

Why it never deletes an attempt a live owner may still complete: it lists
the objects first and reads the metadata after. An owner records an
attempt's uuid in its head before it writes any object under it, so every
attempt listed was recorded before the metadata is read; the record stays
until the owner itself replaces it (having deleted the attempt, or given
it up after a failure) or trims the ledger (its head write first, then the
offload's deletion: a crash between leaves the attempt to this sweep). So
an attempt not referenced then was given up, or belongs to a replaced
owner, whose head writes are refused from then on: it can never be recorded
complete, and nobody reads it. A managed ledger whose newest head cannot be
read (damaged: the loader falls back to an older one) could reference any
attempt: the sweep then deletes nothing. The safety age is a second margin,
as in the queues' garbage collection: a zombie still writing is left to
fail first, and nothing written in the last ``safety_age`` seconds goes.

The namespace must belong to the managed ledgers under ``root`` in
``metadata_store`` alone: attempts that other metadata records (another
root, another host's metadata store) would look unreferenced.
"""

from __future__ import annotations

import uuid as uuid_mod
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tieredstore.ledger.errors import CorruptManagedLedger
from tieredstore.ledger.managed.meta.format import offload_uuid
from tieredstore.ledger.managed.meta.metadata import ManagedLedgerMetadata, list_managed_ledgers
from tieredstore.ledger.managed.meta.state import is_offloaded
from tieredstore.ledger.offload.location import OffloadLocation, OffloadNamespace
from tieredstore.ledger.offload.offloader import SegmentLedgerOffloader
from tieredstore.objectstore.base import ObjectInfo, ObjectStore, UploadInfo
from tieredstore.segment.garbage import (
    UNREFERENCED,
    Garbage,
    GcReport,
    collect,
    stale_uploads,
)
from tieredstore.segment.listing import before

Attempt = tuple[int, uuid_mod.UUID]


@dataclass
class _Listed:
    location: OffloadLocation
    objects: list[ObjectInfo] = field(default_factory=list)
    uploads: list[UploadInfo] = field(default_factory=list)


async def recorded_offloads(metadata_store: ObjectStore, root: str) -> dict[Attempt, bool] | None:
    """What the newest metadata (head and pages) of every managed ledger under
    ``root`` records of its offloads: each attempt ``(ledger_id, uuid)``, and
    whether it is recorded complete. None when no managed ledger under ``root``
    has a head (no metadata to go by). Raises :class:`CorruptManagedLedger` if a
    newest head cannot be read: it could record any attempt."""
    out: dict[Attempt, bool] | None = None
    for path in await list_managed_ledgers(metadata_store, root):
        meta = await ManagedLedgerMetadata.open(metadata_store, path)
        if meta.version == 0:
            continue  # no head: it records nothing
        if meta.head.version != meta.version:
            raise CorruptManagedLedger(f"its newest head, version {meta.version}, is damaged",
                                       name=path.name)
        out = {} if out is None else out
        async for info in meta.ledgers():
            uuid = offload_uuid(info)
            if uuid is not None:
                out[(info.ledgerId, uuid)] = is_offloaded(info)
    return out


async def _list_attempts(store: ObjectStore, space: OffloadNamespace) -> dict[Attempt, _Listed]:
    attempts: dict[Attempt, _Listed] = {}

    def attempt_of(key: str) -> _Listed | None:
        where = space.attempt_of(key)
        return None if where is None else \
            attempts.setdefault((where.ledger_id, where.uuid), _Listed(where))

    for info in await store.list_all(space.list_prefix):
        listed = attempt_of(info.key)
        if listed is not None:
            listed.objects.append(info)
    for upload in await store.list_multipart_uploads(space.list_prefix):
        listed = attempt_of(upload.key)
        if listed is not None:
            listed.uploads.append(upload)
    return attempts


async def find_offload_garbage(
    store: ObjectStore, space: OffloadNamespace, metadata_store: ObjectStore,
    cutoff: datetime, *, root: str = "managed-ledgers",
) -> list[Garbage]:
    """Everything a sweep of the offload namespace ``space`` in ``store`` would
    delete, older than ``cutoff``, without deleting it."""
    listed = await _list_attempts(store, space)  # first the objects...
    try:  # ...then the metadata
        referenced = set(await recorded_offloads(metadata_store, root) or ())
    except CorruptManagedLedger as exc:
        exc.args = (f"{exc}: refusing to sweep",)
        raise
    found: list[Garbage] = []
    for attempt, got in sorted(listed.items()):
        location = got.location
        new = [o for o in got.objects if o.key in location.keys]
        uploads = [u for u in got.uploads if u.key == location.data_key]
        if attempt not in referenced:
            if (new or uploads) and all(before(o.modified, cutoff) for o in new) and all(
                    u.initiated is not None and before(u.initiated, cutoff) for u in uploads):
                if new:
                    found.append(Garbage(UNREFERENCED, location.data_key,
                                         f"ledger {location.ledger_id} attempt {location.uuid}",
                                         keys=tuple(k for k in location.keys
                                                    if k in {o.key for o in new})))
                found += stale_uploads(uploads, cutoff)
        elif location.data_key in {o.key for o in new}:  # else its owner may be writing it
            found += stale_uploads(uploads, cutoff)
    return found


async def sweep_offloads(
    offloader: SegmentLedgerOffloader, metadata_store: ObjectStore, *,
    root: str = "managed-ledgers", safety_age: float, now: datetime | None = None,
    dry_run: bool = False,
) -> GcReport:
    """Find (see :func:`find_offload_garbage`) and, unless ``dry_run``,
    delete what no managed ledger references in ``offloader``'s namespace."""
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=safety_age)
    found = await find_offload_garbage(offloader.store, offloader.options.namespace,
                                       metadata_store, cutoff, root=root)
    return await collect(offloader.store, found, dry_run=dry_run)
