"""Deleting a segment's objects in an order a crash midway can resume from."""

from __future__ import annotations

from collections.abc import Sequence

from tieredstore.errors import ObjectNotFound
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment.path import SegmentPath, parse_chunk_name
from tieredstore.segment.recovery import ENTRY_METADATA_KEY, SEAL_ENTRY


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
    for upload in await store.list_multipart_uploads(path.base_dir):
        await store.abort_multipart(upload.key, upload.upload_id)
    keys = [o.key for o in await store.list_all(path.base_dir)
            if not (keep_fences and o.size == 0
                    and parse_chunk_name(o.key[len(path.base_dir):]) is not None)]
    merged = [k for k in keys if k == path.merged_key]
    marker = [k for k in keys if k == path.sealed_key]
    rest = sorted((k for k in keys if k not in (path.merged_key, path.sealed_key)), reverse=True)
    if merged:
        await store.delete_many(rest + marker)
        await store.delete_many(merged)
    else:
        await store.delete_many(marker)
        await store.delete_many(rest)


async def delete_leftovers(store: ObjectStore, path: SegmentPath, leftovers: Sequence[str]
                           ) -> None:
    """What a merge leaves (chunks, the seal entry, the sealed marker): chunks
    first, the marker last: its absence means cleanup is done."""
    marker = [k for k in leftovers if k == path.sealed_key]
    chunks = [k for k in leftovers if k != path.sealed_key]
    await store.delete_many(chunks)
    await store.delete_many(marker)


async def find_seal(store: ObjectStore, last_zero: str | None) -> str | None:
    """The seal entry's key, if the series ends in one: ``last_zero`` is its
    last entry if that is zero bytes (a fence or a seal), which one HEAD tells
    apart. Cleanup deletes a seal entry, never a fence."""
    if last_zero is None:
        return None
    try:
        info = await store.head(last_zero)
    except ObjectNotFound:
        return None
    return last_zero if info.metadata.get(ENTRY_METADATA_KEY) == SEAL_ENTRY else None
