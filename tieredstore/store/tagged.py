"""Reading by tag: the consume queue decides, the commit log is read for matches only.

Each consume-queue unit carries its message's tags hash. A read by tags looks
at the units from ``offset`` on and reads from the commit log only the records
whose unit's hash is one of the wanted tags' (neighbouring ones with one read),
with ``read_commit_log_span``: just those bytes, not the whole units around
them, each record then checked by its own CRC and against its unit. A record
whose hash matched but whose tags differ (a collision) is dropped. A consumer
that keeps few messages reads few bytes of the commit log.

The answer says where the next read starts (``next_offset``): past every
offset looked at, matched or not, so a consumer never looks at a unit twice.
At most ``max_scan`` units are looked at per call; an answer with no message
and a ``next_offset`` short of the end means: call again from there.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tieredstore.errors import TieredStoreError
from tieredstore.store.checks import record_problem
from tieredstore.store.record import CqUnit, Message, RecordError, decode_record, tags_hash
from tieredstore.store.runs import run_end

if TYPE_CHECKING:
    from tieredstore.store.reading import QueueReading

SCAN_STEP = 4096  # units read from the consume queue at a time (128 KiB)
MAX_SCAN = 65536  # units looked at per call, by default


@dataclass(frozen=True, slots=True)
class Tagged:
    """What a read by tags found, and where the next one starts."""

    messages: list[Message]
    next_offset: int


async def get_by_tags(queue: QueueReading, offset: int, tags: Collection[str], *,
                      max_count: int, max_bytes: int, max_scan: int) -> Tagged:
    """Messages from ``offset`` on whose tags are one of ``tags`` (see the module)."""
    queue.check_range(offset)
    wanted = frozenset(tags)
    hashes = frozenset(tags_hash(t) for t in wanted)
    end = min(queue.max_offset, offset + max_scan)
    found = _Found(max_count, max_bytes)
    at = offset
    while at < end and not found.full:
        step = min(end, at + SCAN_STEP) - at
        units = await queue._readable_units(at, at + step)
        picked = [(at + i, u) for i, u in enumerate(units) if u.tags_hash in hashes]
        stopped = await _read_runs(queue, picked, wanted, found)
        if stopped is not None:
            return Tagged(found.messages, stopped)
        at += len(units)
        if len(units) < step:
            break  # a unit that cannot be read: the next call names it
    return Tagged(found.messages, at)


class _Found:
    __slots__ = ("max_bytes", "max_count", "messages", "total")

    def __init__(self, max_count: int, max_bytes: int) -> None:
        self.messages: list[Message] = []
        self.total = 0
        self.max_count = max_count
        self.max_bytes = max_bytes

    @property
    def full(self) -> bool:
        return len(self.messages) >= self.max_count or (
            bool(self.messages) and self.total >= self.max_bytes)


async def _read_runs(queue: QueueReading, picked: list[tuple[int, CqUnit]],
                     wanted: frozenset[str], found: _Found) -> int | None:
    """Read the picked records, neighbours together; the offset to go on from if
    it stopped before the end of ``picked`` (full, or a record that cannot be
    read after messages were found), else None."""
    spans = [(unit.position, unit.size) for _, unit in picked]
    i = 0
    while i < len(picked):
        first_offset, first = picked[i]
        j, end = run_end(spans, i, await queue.commit_log_segment_end(first.position))
        try:
            data = memoryview(await queue.read_commit_log_span(first.position,
                                                               end - first.position))
        except TieredStoreError:
            if found.messages:
                return first_offset
            raise
        at = 0
        for offset, unit in picked[i:j + 1]:
            record = data[at:at + unit.size]
            at += unit.size
            try:
                message = decode_record(record, queue.topic, queue.queue_id, queue.codec)
                problem = record_problem(message, offset, unit)
            except RecordError as exc:
                problem = str(exc)
            if problem is not None:
                if found.messages:
                    return offset
                raise queue._corrupt(f"message at offset {offset}: {problem}")
            if message.tags in wanted:
                found.messages.append(message)
                found.total += unit.size
                if found.full:
                    return offset + 1
        i = j + 1
    return None
