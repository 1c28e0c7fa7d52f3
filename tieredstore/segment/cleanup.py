"""Deleting a segment's objects in an order a crash midway can resume from."""

from __future__ import annotations

from collections.abc import Sequence

from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment.listing import list_segment
from tieredstore.segment.path import SEALED_NAME, SegmentPath
from tieredstore.segment.recovery import is_seal


async def destroy_segment(store: ObjectStore, path: SegmentPath, *,
                          keep_fences: bool = False) -> None:
    """Delete every object of a segment, without opening it (even a corrupt one).

    The order keeps a crash midway recoverable: a merged object goes last,
    and a sealed marker goes before chunks, which go from the end backwards.
    With ``keep_fences`` the zero-byte entries (fences, seals) stay: a writer
    replaced while it held the segment open may still try its next entry, and
    must find it taken (retention keeps them; GC removes them after its
    safety age, see docs/format.md).
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


async def find_seal(store: ObjectStore, last_zero: str | None) -> str | None:
    """The seal entry's key, if the series ends in one: ``last_zero`` is its
    last entry if that is zero bytes (a fence or a seal), which one HEAD tells
    apart. Cleanup deletes a seal entry, never a fence."""
    return last_zero if last_zero and await is_seal(store, last_zero) else None
