"""Reads that check what they got: damage on the way does not repeat itself.

One read can be damaged on the way (bits flipped, bytes cut short); damage in
the bucket returns the same bytes every time. So a read that fails its check
is read again (:func:`read_again_if`). Objects that are read back to tell
whose they are carry the CRC32C of their bytes in their metadata
(:func:`crc_metadata`): a read whose bytes fail it proves nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tieredstore.checksum import crc32c, format_crc, parse_crc

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


def read_intact(data: bytes | memoryview, metadata: dict[str, str]) -> bool:
    """Whether ``data`` passes the CRC32C its object's metadata records (True when
    it records none)."""
    text = metadata.get(CRC_METADATA_KEY)
    if text is None:
        return True
    try:
        return crc32c(data) == parse_crc(text)
    except ValueError:
        return True  # not ours to judge: compare the bytes
