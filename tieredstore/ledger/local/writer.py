"""LocalLedgerWriter: the one writer of a local ledger.

Each append is one ``pwritev`` (and ``fsync``) of whole entry records under
an exclusive ``flock`` on the log, after checking that the ledger is still
open: a recovery (:mod:`.recovery`) fences the writer by changing that state.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import replace

from tieredstore.ledger.entrylog import RECORD_HEADER_SIZE, encode_record
from tieredstore.ledger.errors import LedgerError, LedgerFenced
from tieredstore.ledger.format import BytesLike
from tieredstore.ledger.handle import LedgerMetadata, LedgerState
from tieredstore.ledger.local.files import LedgerFiles
from tieredstore.ledger.local.reader import LocalReadHandle
from tieredstore.ledger.logfile import flock, pwrite_all


class LocalLedgerWriter(LocalReadHandle):
    """The one writer of a local ledger; also reads what it wrote.

    ``close()`` closes the ledger (BookKeeper's ``WriteHandle.close``): it
    takes no more entries and its metadata records the last entry and length.
    """

    def __init__(self, files: LedgerFiles, ledger_id: int, fd: int,
                 metadata: LedgerMetadata) -> None:
        super().__init__(files, ledger_id, fd, metadata=metadata, offsets=[], end=0)
        self._lock = asyncio.Lock()
        self._failed: BaseException | None = None

    @classmethod
    def _for_new(cls, files: LedgerFiles, ledger_id: int) -> LocalLedgerWriter:
        fd = os.open(files.log_path(ledger_id), os.O_RDWR)
        return cls(files, ledger_id, fd, files.read_meta(ledger_id))

    async def append(self, payload: BytesLike) -> int:
        """Add an entry; return its id once it is durable."""
        return (await self.append_many([payload]))[0]

    async def append_many(self, payloads: Sequence[BytesLike]) -> list[int]:
        """Add entries with one write (and one fsync); return their ids."""
        async with self._lock:
            fd = self._check_open()
            if self._failed is not None:
                raise LedgerError(f"an earlier append failed, the ledger needs recovery: "
                                  f"{self._failed}", ledger_id=self._ledger_id)
            if not payloads:
                return []
            first = self.last_add_confirmed + 1
            buffers: list[BytesLike] = []
            sizes = []
            for i, payload in enumerate(payloads):
                buffers += encode_record(self._ledger_id, first + i, first - 1, payload)
                sizes.append(memoryview(payload).nbytes)
            end = self._offsets[-1]
            try:
                await asyncio.to_thread(self._write, fd, buffers, end)
            except LedgerFenced:
                raise
            except BaseException as exc:
                # The bytes may be partly there; the next append would not know
                # where the log ends. Only a recovery (a new open) settles it.
                self._failed = exc
                raise
            offsets = self._offsets
            offsets.pop()
            for size in sizes:
                offsets.append(end)
                end += RECORD_HEADER_SIZE + size
            offsets.append(end)
            self._metadata = replace(
                self._metadata,
                last_entry_id=first + len(payloads) - 1,
                length=self._metadata.length + sum(sizes),
            )
            return list(range(first, first + len(payloads)))

    def _write(self, fd: int, buffers: list[BytesLike], end: int) -> None:
        with flock(fd):
            state = self._files.read_meta(self._ledger_id).state
            if state is not LedgerState.OPEN:
                raise LedgerFenced(
                    f"the ledger is {state.name}: a new owner opened it for recovery",
                    ledger_id=self._ledger_id,
                )
            if os.fstat(fd).st_size != end:
                os.ftruncate(fd, end)  # our own torn write: never acknowledged
            pwrite_all(fd, buffers, end)
            if self._files.fsync:
                os.fsync(fd)

    async def close(self) -> None:
        """Close the ledger at its last entry. Raises ``LedgerFenced`` if a
        recovery closed it at a different entry first."""
        async with self._lock:
            if self._fd is None:
                return
            fd = self._fd
            try:
                await asyncio.to_thread(self._seal, fd)
            finally:
                self._fd = None
                os.close(fd)

    def _seal(self, fd: int) -> None:
        with flock(fd):
            current = self._files.read_meta(self._ledger_id)
            if current.state is not LedgerState.OPEN:
                if (
                    current.state is LedgerState.CLOSED
                    and current.last_entry_id == self.last_add_confirmed
                ):
                    self._metadata = current
                    return
                raise LedgerFenced(
                    f"the ledger is {current.state.name} at entry {current.last_entry_id}, "
                    f"this writer had {self.last_add_confirmed}",
                    ledger_id=self._ledger_id,
                )
            self._metadata = replace(self._metadata, state=LedgerState.CLOSED)
            self._files.write_meta(self._ledger_id, self._metadata)
