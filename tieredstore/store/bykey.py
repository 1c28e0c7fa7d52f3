"""Looking messages up by key: the key index names candidates, the commit log
confirms them (docs/format.md, *Key index*).

The index's entries carry each record's commit-log position and size, so a
lookup reads no consume queue: it reads the candidates' records, newest
first, with one ranged GET per run of neighbours (records of one segment
within :data:`RUN_GAP` bytes of each other), decodes each (its CRC32C) and
keeps it if its offset is the entry's, its keys hold the key and its
timestamp is in the range. A hash shared with another key costs a read,
never a wrong answer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tieredstore.errors import TieredStoreError
from tieredstore.store.keyindex import IndexEntry, key_hash
from tieredstore.store.record import Message, RecordError, decode_record

if TYPE_CHECKING:
    from tieredstore.store.queue import QueueLog

log = logging.getLogger(__name__)

RUN_GAP = 64 * 1024  # bytes between two candidates' records read in one GET


async def query_queue(queue: QueueLog, key: str, begin_ms: int, end_ms: int,
                      max_count: int) -> list[Message]:
    """The newest ``max_count`` messages of ``queue`` with ``key`` stamped in
    ``[begin_ms, end_ms]``, newest first."""
    entries = await queue.index.candidates(key, begin_ms, end_ms)
    wanted = key_hash(key)
    entries.extend(IndexEntry(wanted, p.offset, p.unit.store_timestamp, p.unit.position,
                              p.unit.size) for p in queue.undispatched()
                   if key in p.keys and begin_ms <= p.unit.store_timestamp <= end_ms)
    first = queue.min_offset
    unique = {e.offset: e for e in entries if e.offset >= first}
    newest = sorted(unique.values(), key=lambda e: e.offset, reverse=True)
    found: list[Message] = []
    while newest and len(found) < max_count:
        batch, newest = newest[: max_count - len(found)], newest[max_count - len(found):]
        found.extend(await _confirm(queue, sorted(batch, key=lambda e: e.position), key,
                                    begin_ms, end_ms))
    found.sort(key=lambda m: m.offset, reverse=True)
    return found[:max_count]


async def _confirm(queue: QueueLog, entries: list[IndexEntry], key: str, begin_ms: int,
                   end_ms: int) -> list[Message]:
    """The records of ``entries`` (in position order) that hold ``key``."""
    out: list[Message] = []
    i = 0
    while i < len(entries):
        try:
            segment_end = await queue.commit_log_segment_end(entries[i].position)
            j, end = i, entries[i].position + entries[i].size
            while (j + 1 < len(entries) and entries[j + 1].position - end <= RUN_GAP
                   and entries[j + 1].position + entries[j + 1].size <= segment_end):
                j += 1
                end = max(end, entries[j].position + entries[j].size)
            start = entries[i].position
            data = memoryview(await queue.read_commit_log_span(start, end - start))
        except TieredStoreError as exc:
            log.warning("%s/%d: a key lookup skips the record at commit-log byte %d: %s",
                        queue.topic, queue.queue_id, entries[i].position, exc)
            i += 1
            continue
        for entry in entries[i:j + 1]:
            at = entry.position - start
            try:
                message = decode_record(data[at:at + entry.size], queue.topic, queue.queue_id)
            except RecordError as exc:
                log.warning("%s/%d: a key lookup skips offset %d: %s", queue.topic,
                            queue.queue_id, entry.offset, exc)
                continue
            if (message.offset == entry.offset and key in message.keys
                    and begin_ms <= message.store_timestamp <= end_ms):
                out.append(message)
        i = j + 1
    return out
