"""Opening the log: claim it, read every log object's index, hand out the pieces.

After its fence an opening store lists every entry of its broker's log (all
pages) and reads each data entry's index (one ranged GET, two for a long
index). A log object gone meanwhile had its pieces moved into chunks before
it was deleted (docs/format.md, "Reading the log"): it is skipped. One whose
index fails its checks three times raises :class:`LogCorrupt`, naming it: which
queues its pieces belong to is unknown, and opening without them could hand
out their positions again.
"""

from __future__ import annotations

import asyncio
import logging
import time

from tieredstore.errors import ObjectNotFound
from tieredstore.log.index import read_index
from tieredstore.log.series import LogEntry
from tieredstore.log.writer import LogWriter
from tieredstore.segment.layout import ChunkRef

log = logging.getLogger(__name__)

READ_CONCURRENCY = 16


async def recover_log(writer: LogWriter) -> None:
    """Claim the log for ``writer`` and tell it every piece the log holds."""
    entries = await writer.series.claim()
    next_seq = writer.series.next_seq
    assert next_seq is not None
    now = time.time()
    writer.tracker.landed(next_seq - 1, 0, now)  # our fence: the newest entry
    # Every fence below ours (older stores' fences and fills, and our own fills)
    # is a dead object seen now: deleted gc_safety_age from now, as a data entry
    # whose pieces all moved (docs/format.md, "Deletion"). Not with no safety age
    # at all: an idle store's look would race the deletion.
    if writer.options.delete_age > 0:
        for seq in [e.seq for e in entries if e.fence] + writer.series.own_fills:
            writer.tracker.landed(seq, 0, now)
    limit = asyncio.Semaphore(READ_CONCURRENCY)

    async def one(entry: LogEntry) -> None:
        async with limit:
            try:
                pieces = await read_index(writer.store, entry.key, entry.size)
            except ObjectNotFound:
                return  # deleted after its pieces moved into chunks
        writer.tracker.landed(entry.seq, len(pieces), time.time())
        for p in pieces:
            writer.found(p.segment, ChunkRef(p.position, p.length, entry.key, p.object_offset,
                                             p.crc32c))

    await asyncio.gather(*(one(e) for e in entries if not e.fence))
