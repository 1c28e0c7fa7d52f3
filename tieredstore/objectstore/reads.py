"""Reading an object back to tell whether it is what we wrote.

After a conditional create finds its key taken, a writer reads the object to
tell its own earlier attempt (whose answer was lost) from another writer's.
One read can be damaged on the way (bits flipped, bytes cut short), and one
wrong answer would fence a live writer. So a read that does not match is
read again: the object is ours if a read matches, and another's only when two
reads return the same other bytes (damage on the way does not repeat itself).
Reads that keep coming back different are a transient failure.

Objects written for such checks carry the CRC32C of their bytes in their
metadata (:func:`crc_metadata`): a read whose bytes fail it was damaged on the
way and proves nothing, however often that happens.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tieredstore.checksum import crc32c, format_crc, parse_crc
from tieredstore.errors import ObjectNotFound, ServerError
from tieredstore.objectstore.base import ObjectStore

MATCH_ATTEMPTS = 6
CRC_METADATA_KEY = "crc32c"
READ_ATTEMPTS = 3  # damage on the way does not repeat itself; damage in the bucket does

T = TypeVar("T")
log = logging.getLogger(__name__)


async def read_again_if(damaged: type[Exception] | tuple[type[Exception], ...],
                        read: Callable[[], Awaitable[T]], attempts: int = READ_ATTEMPTS) -> T:
    """``read()`` (a GET and the checks of what it returned), done again while it
    raises ``damaged``: only damage that repeats is believed, and the last
    failure is raised once ``attempts`` reads all failed. Each read again is
    logged (a warning naming what failed)."""
    for attempt in range(attempts):
        try:
            return await read()
        except damaged as exc:
            if attempt + 1 == attempts:
                raise
            log.warning("read again after a failed check: %s", exc)
    raise AssertionError("unreachable")


def crc_metadata(data: bytes) -> dict[str, str]:
    """The metadata that lets a reader tell damaged reads of ``data`` apart."""
    return {CRC_METADATA_KEY: format_crc(crc32c(data))}


def read_intact(data: bytes, metadata: dict[str, str]) -> bool:
    """Whether ``data`` passes the CRC32C its object's metadata records (True when
    it records none)."""
    text = metadata.get(CRC_METADATA_KEY)
    if text is None:
        return True
    try:
        return crc32c(data) == parse_crc(text)
    except ValueError:
        return True  # not ours to judge: compare the bytes


async def stored_matches(store: ObjectStore, key: str, matches: Callable[[bytes], bool], *,
                         attempts: int = MATCH_ATTEMPTS) -> bool:
    """Whether the object at ``key`` satisfies ``matches``: True on a read that
    does, False when it is gone or two reads agree on other bytes."""
    previous: bytes | None = None
    for _ in range(attempts):
        try:
            got = await store.get_object(key)
        except ObjectNotFound:
            return False
        data = got.data
        if matches(data):
            return True
        if not read_intact(data, dict(got.info.metadata)):
            continue  # damaged on the way: not evidence of another writer
        if data == previous:
            return False
        previous = data
    raise ServerError(f"{key}: {attempts} reads came back different; cannot tell whose it is",
                      op="get", key=key)
