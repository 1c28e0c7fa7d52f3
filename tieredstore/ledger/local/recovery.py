"""Fencing a local ledger for a new owner, as BookKeeper does (seed 004).

A ledger has one writer, the handle that created it. Opening a ledger with
``recovery=True`` (a new owner taking over) fences it: the metadata goes to
``IN_RECOVERY``, the log is scanned, every digest checked, a torn tail cut
off, and the ledger is closed at the last whole entry. Every append and the
writer's close hold an exclusive ``flock`` on the log file and check the
state under it (:mod:`.writer`), so once a recovery has begun the old
writer's next append is refused with
:class:`~tieredstore.ledger.errors.LedgerFenced`, in this process or another.
"""

from __future__ import annotations

import os
from dataclasses import replace

from tieredstore.ledger.handle import LedgerMetadata, LedgerState
from tieredstore.ledger.local.files import LedgerFiles
from tieredstore.ledger.logfile import scan_log


def recover_ledger(files: LedgerFiles, ledger_id: int, fd: int) -> LedgerMetadata:
    """Fence and close the ledger; the caller holds the log's flock."""
    metadata = files.read_meta(ledger_id)
    if metadata.state is LedgerState.CLOSED:
        return metadata
    if metadata.state is LedgerState.OPEN:
        metadata = replace(metadata, state=LedgerState.IN_RECOVERY)
        files.write_meta(ledger_id, metadata)  # the fence: the writer checks it
    offsets, end, length = scan_log(ledger_id, fd, verify=True)
    if os.fstat(fd).st_size != end:
        os.ftruncate(fd, end)  # a torn tail: never acknowledged
        if files.fsync:
            os.fsync(fd)
    metadata = replace(
        metadata, state=LedgerState.CLOSED, last_entry_id=len(offsets) - 1, length=length
    )
    files.write_meta(ledger_id, metadata)
    return metadata
