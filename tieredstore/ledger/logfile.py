"""The local ledger store's file handling: locks, durable writes, log scans.

Blocking functions, called from worker threads by :mod:`tieredstore.ledger.local`.
A scan walks a log's records from the start (see
:mod:`tieredstore.ledger.entrylog` for their bytes) and tells a torn tail,
which a crash mid-append leaves, from damage, which is never cut off quietly.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from tieredstore.ledger.entrylog import (
    RECORD_HEADER_SIZE,
    EntryLogError,
    RecordHeader,
    check_record,
    decode_header,
)
from tieredstore.ledger.errors import CorruptLedger
from tieredstore.ledger.format import INT64_MAX, BytesLike


def check_id(ledger_id: int) -> int:
    if isinstance(ledger_id, bool) or not isinstance(ledger_id, int) or \
            not 0 <= ledger_id <= INT64_MAX:
        raise ValueError(f"ledger id must be an int in [0, 2**63), got {ledger_id!r}")
    return ledger_id


@contextlib.contextmanager
def flock(fd: int) -> Iterator[None]:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def write_file(path: Path, data: bytes, fsync: bool) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pwrite_all(fd: int, buffers: list[BytesLike], offset: int) -> None:
    views = [memoryview(b).cast("B") for b in buffers]
    views = [v for v in views if len(v)]
    while views:
        written = os.pwritev(fd, views[:1024], offset)
        offset += written
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if written:
            views[0] = views[0][written:]


def pread_exact(fd: int, length: int, offset: int, ledger_id: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise CorruptLedger(
            f"log is short: {len(data)} of {length} bytes at offset {offset}",
            ledger_id=ledger_id,
        )
    return data


def scan_log(ledger_id: int, fd: int, *, verify: bool) -> tuple[list[int], int, int]:
    """The offsets of the whole records from the log's start, where the last
    ends, and the payload bytes.

    Without ``verify`` (a reader; a writer may be appending) the scan stops at
    the first record that is not whole and well-formed. With ``verify`` (a
    recovery) every digest is checked, and what ends the scan must be a torn
    tail: a partial record, a last record whose digest fails, or zeros to the
    end of the file. Anything else is :class:`CorruptLedger`, never a quietly
    shorter ledger.
    """
    size = os.fstat(fd).st_size
    offsets: list[int] = []
    pos = length = 0
    while pos < size:
        entry_id = len(offsets)
        header = _record_at(fd, ledger_id, entry_id, pos, size=size, verify=verify)
        if not isinstance(header, RecordHeader):
            if verify and not _torn_tail(fd, pos, size, header):
                raise CorruptLedger(
                    f"log offset {pos}, entry {entry_id}: {header[0]}", ledger_id=ledger_id
                )
            break
        offsets.append(pos)
        length += header.length
        pos += header.record_size
    return offsets, pos, length


def _record_at(fd: int, ledger_id: int, entry_id: int, pos: int, *, size: int, verify: bool
               ) -> RecordHeader | tuple[str, int]:
    """The header of the whole, valid record of ``entry_id`` at ``pos``; else
    what is wrong and where the bad record would end (-1: unknown)."""
    if pos + RECORD_HEADER_SIZE > size:
        return "partial record header", size
    try:
        header = decode_header(os.pread(fd, RECORD_HEADER_SIZE, pos))
    except EntryLogError as exc:
        return str(exc), -1
    if (header.ledger_id, header.entry_id) != (ledger_id, entry_id):
        return f"record names ledger {header.ledger_id} entry {header.entry_id}", -1
    if pos + header.record_size > size:
        return "partial record", size
    if verify:
        try:
            check_record(os.pread(fd, header.record_size, pos), ledger_id, entry_id)
        except EntryLogError as exc:
            return str(exc), pos + header.record_size
    return header


def _torn_tail(fd: int, pos: int, size: int, problem: tuple[str, int]) -> bool:
    """Whether the bad bytes from ``pos`` are what a crash mid-append leaves."""
    if problem[1] == size:
        return True  # partial, or the very last record
    step = 1 << 20
    for start in range(pos, size, step):
        if os.pread(fd, min(step, size - start), start).strip(b"\0"):
            return False
    return True
