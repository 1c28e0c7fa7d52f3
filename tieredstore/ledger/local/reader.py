"""LocalReadHandle: reads a local ledger, each entry's digest checked.

Opening scans the log for its entry offsets; a closed ledger's log must
hold the entries its metadata says (bytes past them are not part of it),
an open one is read as far as its log holds whole entries.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import replace

from tieredstore.ledger.entrylog import EntryLogError, check_record
from tieredstore.ledger.errors import CorruptLedger, DigestMismatch, LedgerClosed, LedgerNotFound
from tieredstore.ledger.handle import (
    LedgerEntry,
    LedgerMetadata,
    LedgerState,
    ReadHandle,
    check_range,
)
from tieredstore.ledger.local.files import LedgerFiles
from tieredstore.ledger.local.recovery import recover_ledger
from tieredstore.ledger.logfile import flock, pread_exact, scan_log


class LocalReadHandle(ReadHandle):
    """Reads a local ledger; each entry's digest is checked."""

    def __init__(self, files: LedgerFiles, ledger_id: int, fd: int, *,
                 metadata: LedgerMetadata, offsets: list[int], end: int) -> None:
        self._files = files
        self._ledger_id = ledger_id
        self._fd: int | None = fd
        self._metadata = metadata
        self._offsets = offsets  # entry id -> record offset; then the end of the last
        self._offsets.append(end)

    @classmethod
    def _open(cls, files: LedgerFiles, ledger_id: int, recovery: bool) -> LocalReadHandle:
        try:
            fd = os.open(files.log_path(ledger_id), os.O_RDWR if recovery else os.O_RDONLY)
        except FileNotFoundError:
            raise LedgerNotFound(f"no such ledger in {os.path.abspath(files.root)}",
                                 ledger_id=ledger_id) from None
        try:
            with flock(fd) if recovery else contextlib.nullcontext():
                metadata = (recover_ledger(files, ledger_id, fd) if recovery
                            else files.read_meta(ledger_id))
                offsets, end, length = scan_log(ledger_id, fd, verify=False)
            if metadata.state is LedgerState.CLOSED:
                count = metadata.last_entry_id + 1
                if len(offsets) < count or (len(offsets) == count and length != metadata.length):
                    raise CorruptLedger(
                        f"closed at entry {metadata.last_entry_id} ({metadata.length} bytes), "
                        f"but its log holds {len(offsets)} entries ({length} bytes)",
                        ledger_id=ledger_id,
                    )
                if len(offsets) > count:  # bytes past the close: not part of the ledger
                    end = offsets[count]
                    del offsets[count:]
            else:
                metadata = replace(metadata, last_entry_id=len(offsets) - 1, length=length)
            return cls(files, ledger_id, fd, metadata=metadata, offsets=offsets, end=end)
        except BaseException:
            os.close(fd)
            raise

    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    def _check_open(self) -> int:
        if self._fd is None:
            raise LedgerClosed("the handle is closed", ledger_id=self._ledger_id)
        return self._fd

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        # docstring inherited
        fd = self._check_open()
        check_range(self._ledger_id, first, last, self.last_add_confirmed)
        start, end = self._offsets[first], self._offsets[last + 1]
        data = await asyncio.to_thread(pread_exact, fd, end - start, start, self._ledger_id)
        view = memoryview(data)
        out = []
        for entry_id in range(first, last + 1):
            a, b = self._offsets[entry_id] - start, self._offsets[entry_id + 1] - start
            try:
                payload = check_record(view[a:b], self._ledger_id, entry_id)
            except EntryLogError as exc:
                raise DigestMismatch(str(exc), ledger_id=self._ledger_id) from None
            out.append(LedgerEntry(entry_id, bytes(payload)))
        return out

    async def close(self) -> None:
        # docstring inherited
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
