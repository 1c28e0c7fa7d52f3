"""Conditional creates: the next object of a fenced series, created once.

Every series of objects that writers race for (a segment's chunk entries and
sealed marker, the broker's log, queue and managed-ledger heads, the broker's
writer entries, an offload's index, content-addressed metadata pages) creates
each object with ``If-None-Match: *``, through :func:`create_once`. A create
refused because its key is taken (412: the chokepoint's retry after a lost
reply gets one too) is one of two things, told apart here:

- this writer's own earlier attempt that landed and lost its reply: the
  create succeeded (True);
- another writer's object, or nothing any more (taken, then deleted): the
  caller lost the race (False) and raises its layer's fenced error, or takes
  the next position of its series.

What proves an object ours is chosen by the series:

- ``compare="bytes"`` (the default): the object holds exactly our bytes, read
  back through :func:`~tieredstore.objectstore.reads.stored_matches` (a read
  damaged on the way is read again, never taken for another writer's). For
  objects whose bytes are unique to their writer (a session id or nonce in
  them) or where equal bytes are as good as ours (a digest-keyed page).
- ``compare="metadata"``: one HEAD shows our size and every metadata entry we
  sent, which must name the writer and carry the CRC32C of the bytes. For
  objects whose bytes do not say who wrote them (zero-byte fences) or are too
  large to read back (chunks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from tieredstore.errors import ObjectNotFound, PreconditionFailed
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.reads import stored_matches


async def create_once(store: ObjectStore, key: str, data: bytes, *,
                      metadata: Mapping[str, str] | None = None,
                      compare: Literal["bytes", "metadata"] = "bytes") -> bool:
    """Create ``key`` holding ``data`` (and ``metadata``) if it is free. True if
    the object there is ours (created now, or by our own earlier attempt);
    False if it is another writer's, or was taken and is gone."""
    try:
        await store.put(key, data, if_none_match=True, metadata=metadata)
        return True
    except PreconditionFailed:
        pass
    if compare == "bytes":
        return await stored_matches(store, key, lambda stored: stored == data)
    try:
        info = await store.head(key)
    except ObjectNotFound:
        return False
    return info.size == len(data) and all(
        info.metadata.get(name) == value for name, value in (metadata or {}).items())
