"""Reading by tag: the consume queue decides, the commit log is read for matches only.

Each consume-queue unit carries its message's tags hash. A read by tags looks
at the units from ``offset`` on and reads from the commit log only the records
whose unit's hash is one of the wanted tags' (neighbouring ones with one read),
with span reads: just those bytes, not the whole units around
them, each record then checked by its own CRC and against its unit. A record
whose hash matched but whose tags differ (a collision) is dropped. A consumer
that keeps few messages reads few bytes of the commit log.

The answer says where the next read starts (``next_offset``): past every
offset looked at, matched or not, so a consumer never looks at a unit twice.
At most ``max_scan`` units are looked at per call; an answer with no message
and a ``next_offset`` short of the end means: call again from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore.store.formats.record import Message

MAX_SCAN = 65536  # units looked at per call, by default


@dataclass(frozen=True, slots=True)
class Tagged:
    """What a read by tags found, and where the next one starts."""

    messages: list[Message]
    next_offset: int
