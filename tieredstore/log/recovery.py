"""Opening the log: claim it, read every log object's index, hand out the pieces.

After its fence an opening store lists every entry of its broker's log (all
pages) and reads each data entry's index (one ranged GET, two for a long
index). A log object gone meanwhile had its pieces moved into chunks before
it was deleted (docs/log-objects.md, "Reading the log"): it is skipped. One whose
index fails its checks three times raises :class:`LogCorrupt`, naming it: which
queues its pieces belong to is unknown, and opening without them could hand
out their positions again.
"""

from __future__ import annotations

import time

from tieredstore.log.pieces import load_pieces
from tieredstore.log.writer import LogWriter


async def recover_log(writer: LogWriter) -> None:
    """Claim the log for ``writer`` and tell it every piece the log holds."""
    entries = await writer.series.claim()
    next_seq = writer.series.next_seq
    assert next_seq is not None
    now = time.time()
    writer.tracker.landed(next_seq - 1, 0, now)  # our fence: the newest entry
    # Every fence below ours (older stores' fences and fills, and our own fills)
    # is a dead object seen now: deleted gc_safety_age from now, as a data entry
    # whose pieces all moved (docs/log-objects.md, "Deletion"). Not with no safety age
    # at all: an idle store's look would race the deletion.
    if writer.options.delete_age > 0:
        for seq in [e.seq for e in entries if e.fence] + writer.series.own_fills:
            writer.tracker.landed(seq, 0, now)
    for entry, pieces in await load_pieces(writer.store, entries):
        writer.tracker.landed(entry.seq, len(pieces), time.time())
        for key, unit in pieces:
            writer.found(key, unit)
