"""Conditional creates: the objects a segment's writer makes with ``If-None-Match: *``.

The entries of the chunk series and the sealed marker are created only if
their key is free. A create refused because the key is taken is either a
retry of this writer's own create whose answer was lost (what is there is
ours: it succeeded) or another writer's object (a newer writer took the
segment over: the caller is fenced). Each function here tells the two apart
and returns False for the second; see :mod:`tieredstore.segment.chunked`.
"""

from __future__ import annotations

from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import ObjectNotFound, PreconditionFailed
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.reads import (
    CRC_METADATA_KEY,
    crc_metadata,
    stored_matches,
)
from tieredstore.segment.path import SegmentPath
from tieredstore.segment.recovery import (
    ENTRY_METADATA_KEY,
    WRITER_METADATA_KEY,
    encode_marker,
)


async def create_entry(store: ObjectStore, key: str, body: bytes, writer_id: str,
                       kind: str | None) -> bool:
    """Create the entry at ``key``; False if another writer's entry holds its id.
    A retry that finds this writer's own entry (its answer was lost) succeeded."""
    crc = format_crc(crc32c(body))
    metadata = {CRC_METADATA_KEY: crc, WRITER_METADATA_KEY: writer_id}
    if kind is not None:
        metadata[ENTRY_METADATA_KEY] = kind
    try:
        await store.put(key, body, if_none_match=True, metadata=metadata)
        return True
    except PreconditionFailed:
        pass
    try:
        info = await store.head(key)
    except ObjectNotFound:
        # Taken, then gone: only a merge's cleanup deletes entries, after a seal.
        return False
    return (info.metadata.get(WRITER_METADATA_KEY) == writer_id
            and info.size == len(body) and info.metadata.get(CRC_METADATA_KEY) == crc)


async def create_marker(store: ObjectStore, path: SegmentPath, size: int) -> bool:
    """Create the sealed marker recording ``size`` bytes; False if a marker that
    says anything else is there (another writer's)."""
    try:
        marker = encode_marker(size)
        await store.put(path.sealed_key, marker, if_none_match=True,
                        metadata=crc_metadata(marker))
    except PreconditionFailed:
        return await stored_matches(store, path.sealed_key,
                                    lambda data: data == encode_marker(size))
    return True
