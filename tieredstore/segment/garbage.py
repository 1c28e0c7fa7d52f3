"""Garbage: what a collection pass found, and the one way segment objects are deleted.

Every deletion of segment objects goes through here, in an order a crash
midway can resume from: a segment destroyed whole (:func:`destroy_segment`),
a merge's leftovers (:func:`delete_leftovers`), a pass's garbage. The
finders decide what is garbage (the store's for queues, log objects and
temporary files, the ledger adapter's for offload attempts; docs/gc.md,
*Garbage collection*); each item says how it goes, and :func:`collect`
deletes a pass's items in this order:

1. plain objects (data chunks beside a merged object, an attempt's index,
   dead log objects and fences), then the ``sealed`` markers: a marker's
   absence means a merge's cleanup is done, so it goes last;
2. whole segments, in :func:`destroy_segment`'s order (the merged object last);
3. multipart uploads, aborted;
4. the backend's temporary files.

``dry_run`` lists and deletes nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tieredstore.objectstore.base import ObjectStore, UploadInfo
from tieredstore.segment.listing import SegmentListing, before, list_segment
from tieredstore.segment.path import SEALED_NAME, SegmentPath

log = logging.getLogger(__name__)

TRIMMED = "trimmed segment"
BESIDE_MERGED = "leftovers beside a merged object"
UPLOAD = "multipart upload"
TEMPORARY = "temporary file"
DEAD_LOG = "log object with nothing live"
LOG_FENCE = "log fence"
UNREFERENCED = "unreferenced offload attempt"


async def destroy_segment(store: ObjectStore, path: SegmentPath, *,
                          keep_fences: bool = False) -> None:
    """Delete every object of a segment, without opening it (even a corrupt one).

    The order keeps a crash midway recoverable: a merged object goes last,
    and a sealed marker goes before chunks, which go from the end backwards.
    With ``keep_fences`` the zero-byte entries (fences, seals) stay: a writer
    replaced while it held the segment open may still try its next entry, and
    must find it taken (retention keeps them; GC removes them after its
    safety age, see docs/chunks.md).
    """
    listing = await list_segment(store, path, uploads=True)
    for upload in listing.uploads:
        await store.abort_multipart(upload.key, upload.upload_id)
    fences = {c.key for c in listing.chunks if not c.size} if keep_fences else set()
    rest = sorted((o.key for o in listing.objects if o.key not in fences
                   and o is not listing.merged and o is not listing.marker), reverse=True)
    marker = [listing.marker.key] if listing.marker is not None else []
    if listing.merged is not None:
        await store.delete_many(rest + marker)
        await store.delete_many([listing.merged.key])
    else:
        await store.delete_many(marker)
        await store.delete_many(rest)


async def delete_leftovers(store: ObjectStore, keys: Sequence[str]) -> None:
    """What a merge leaves (chunks, the seal entry, the sealed marker), of one
    segment or many: the markers last, as their absence means cleanup is done."""
    marker = [k for k in keys if k.endswith("/" + SEALED_NAME)]
    await store.delete_many([k for k in keys if not k.endswith("/" + SEALED_NAME)])
    await store.delete_many(marker)


@dataclass(frozen=True, slots=True)
class Garbage:
    """One thing a pass deletes: its kind, the key it is shown by (a segment's
    directory, ``key#upload-id`` for an upload), why, and what goes: ``keys``
    (objects), then ``segment`` (every object of it), ``upload`` (aborted), or
    the backend's temporary file ``key`` (``temporary``); ``broker``: the
    broker whose queue or log it is of, if any."""

    kind: str
    key: str
    detail: str
    keys: tuple[str, ...] = ()
    segment: SegmentPath | None = None
    upload: tuple[str, str] | None = None  # (key, upload id)
    temporary: bool = False
    broker: str | None = None


@dataclass
class GcReport:
    found: list[Garbage] = field(default_factory=list)
    deleted: int = 0
    dry_run: bool = False

    def by_kind(self) -> dict[str, int]:
        return dict(Counter(item.kind for item in self.found))


def beside_merged(listing: SegmentListing, cutoff: datetime, *, entries: bool = False
                  ) -> list[Garbage]:
    """A merged segment's data chunks and sealed marker older than ``cutoff`` (a
    merge's cleanup that did not finish), as one item. Zero-byte entries stay,
    unless ``entries`` (an offload attempt: written once, no replaced writer of
    its own to stop)."""
    zero = [c for c in listing.chunks if not c.size] if entries and listing.merged else []
    keys = [o for o in listing.leftovers + zero if before(o.modified, cutoff)]
    if not keys:
        return []
    return [Garbage(BESIDE_MERGED, listing.path.base_dir,
                    f"{len(keys)} object(s), {sum(o.size for o in keys)} bytes",
                    keys=tuple(sorted(o.key for o in keys)))]


def stale_uploads(uploads: Iterable[UploadInfo], cutoff: datetime) -> list[Garbage]:
    """The uploads begun before ``cutoff`` (a merge whose writer died)."""
    return [Garbage(UPLOAD, f"{u.key}#{u.upload_id}", f"begun {u.initiated:%Y-%m-%d %H:%M:%S}Z",
                    upload=(u.key, u.upload_id))
            for u in uploads if u.initiated is not None and before(u.initiated, cutoff)]


async def collect(store: ObjectStore, found: Sequence[Garbage], *, dry_run: bool = False
                  ) -> GcReport:
    """A pass's report: ``found``, deleted in the module's order unless ``dry_run``."""
    report = GcReport(list(found), dry_run=dry_run)
    if dry_run or not found:
        return report
    await delete_leftovers(store, [k for item in found for k in item.keys])
    for item in found:
        if item.segment is not None:
            await destroy_segment(store, item.segment)
    for item in found:
        if item.upload is not None:
            await store.abort_multipart(*item.upload)
    temporary = [item.key for item in found if item.temporary]
    if temporary and store.temporary_files is not None:
        await store.temporary_files.delete(temporary)
    report.deleted = len(found)
    log.info("garbage collection deleted %d item(s): %s", report.deleted, report.by_kind())
    return report
