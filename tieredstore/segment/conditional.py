"""The entries of a chunk series (a segment's, or the broker's log), created once.

An entry is created with ``If-None-Match: *`` (:func:`~tieredstore.objectstore.
conditional.create_once`), carrying its writer's id, its kind and the CRC32C of
its bytes in its metadata: a retry that finds its own earlier entry (its answer
was lost) succeeded, anything else at the id is a newer writer's (the caller is
fenced); see :mod:`tieredstore.segment.chunked` and :mod:`tieredstore.log.series`.
"""

from __future__ import annotations

from tieredstore.checksum import crc32c, format_crc
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.conditional import create_once
from tieredstore.objectstore.reads import CRC_METADATA_KEY
from tieredstore.segment.recovery import ENTRY_METADATA_KEY, WRITER_METADATA_KEY


async def create_entry(store: ObjectStore, key: str, body: bytes, writer_id: str,
                       kind: str | None) -> bool:
    """Create the entry at ``key``; False if another writer's entry holds its id
    (or held it: only a merge's cleanup deletes entries, after a seal)."""
    metadata = {CRC_METADATA_KEY: format_crc(crc32c(body)), WRITER_METADATA_KEY: writer_id}
    if kind is not None:
        metadata[ENTRY_METADATA_KEY] = kind
    return await create_once(store, key, body, metadata=metadata, compare="metadata")
