"""Conditional creates: the next object of a fenced series, created once.

Every object that writers race for (chunk-series entries, the sealed marker,
heads, the broker's writer entries, an offload's index, digest-keyed pages) is
created with ``If-None-Match: *`` through :func:`create_once`. A create refused
because its key is taken (412, also what a retry after a lost reply gets) is
our own earlier attempt that landed (True: it succeeded) or another writer's
object, or one taken and gone (False: the caller raises its layer's fenced
error, or takes the next position of its series). The proof of "ours":

- ``compare="bytes"``: the object holds exactly our bytes. One read can be
  damaged on the way, and one wrong answer would fence a live writer: so a
  read that does not match is read again, and the object is another's only
  when two reads return the same other bytes that pass the CRC32C in its
  metadata, if it has one (:func:`~tieredstore.objectstore.reads.crc_metadata`).
  Reads that keep differing are a transient failure. For bytes unique to their
  writer (a session id or nonce in them), or where equal bytes are as good as
  ours (a digest-keyed page).
- ``compare="metadata"``: a HEAD shows our size and every metadata entry we
  sent, which must name the writer and carry the CRC32C of the bytes. For
  bytes that do not say who wrote them (empty fences) or are large (chunks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from tieredstore.errors import ObjectNotFound, PreconditionFailed, ServerError
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.reads import read_intact

MATCH_ATTEMPTS = 6


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
    try:
        if compare == "metadata":
            return await holds_metadata(store, key, len(data), metadata or {})
        previous: bytes | memoryview | None = None
        for _ in range(MATCH_ATTEMPTS):
            got = await store.get_object(key)
            if got.data == data:
                return True
            if read_intact(got.data, dict(got.info.metadata)):  # else damaged on the way
                if got.data == previous:
                    return False
                previous = got.data
    except ObjectNotFound:
        return False
    raise ServerError(f"{key}: {MATCH_ATTEMPTS} reads came back different; cannot tell whose "
                      "it is", op="get", key=key)


async def holds_metadata(store: ObjectStore, key: str, size: int,
                         metadata: Mapping[str, str]) -> bool:
    """``compare="metadata"``'s proof: a HEAD of ``key`` shows ``size`` and every
    entry of ``metadata`` (False if the object is gone)."""
    try:
        info = await store.head(key)
    except ObjectNotFound:
        return False
    return info.size == size and all(
        info.metadata.get(name) == value for name, value in metadata.items())
