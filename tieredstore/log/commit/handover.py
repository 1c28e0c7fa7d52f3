"""Handovers: the queues a store held when it closed cleanly, in one log entry.

The last entry a store creates at a clean close (docs/writers.md, "A clean
close hands its queues over"; docs/log-objects.md, "Version 2"): a version 2
entry of kind :data:`~tieredstore.log.format.HANDOVER` holding no piece, whose
index names each queue. The next store to open, finding it the newest entry
below its fence, need not claim those queues.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from tieredstore.log.commit.state import QueueId
from tieredstore.log.errors import LogCorrupt
from tieredstore.log.format import (
    HANDOVER,
    HEADER_SIZE,
    VERSION_2,
    LogFooter,
    frame_index,
    header,
    pack_topic,
    unpack_topic,
)

_COUNT = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class HandoverIndex:
    """A handover's index: the queues its store held."""

    queues: frozenset[QueueId]


def encode_handover(queues: Iterable[QueueId]) -> bytes:
    """The entry naming ``queues`` (a ValueError if one does not fit an index)."""
    named = sorted(set(queues))
    index = _COUNT.pack(len(named)) + b"".join(
        pack_topic(topic, queue) + _COUNT.pack(queue) for topic, queue in named)
    return b"".join([header(VERSION_2, HANDOVER),
                     *frame_index(index, HEADER_SIZE, 0, VERSION_2, HANDOVER)])


def decode_handover_index(view: memoryview, footer: LogFooter, *, key: str) -> HandoverIndex:
    """A handover's index (its CRC checked by the caller), checked."""
    if footer.piece_count or footer.index_offset != HEADER_SIZE:
        raise LogCorrupt(key, "a handover holds pieces or data")
    try:
        (count,) = _COUNT.unpack_from(view, 0)
        at, queues = _COUNT.size, set()
        for _ in range(count):
            topic, at = unpack_topic(view, at)
            (queue,) = _COUNT.unpack_from(view, at)
            at += _COUNT.size
            queues.add((topic, queue))
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise LogCorrupt(key, f"handover index is malformed: {exc}") from None
    if at != len(view) or len(queues) != count:
        raise LogCorrupt(key, "handover index does not hold its count of queues")
    return HandoverIndex(frozenset(queues))
