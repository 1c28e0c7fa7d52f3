"""What a valid queue is: the checks the store, ``verify`` and Spark share.

Each check is pure (no IO) or reads through callables it is given, and says
what it finds. The store's reads and recovery, its queue scan
(:mod:`tieredstore.store.read.scan`: Spark's reader) and its verifier
(:mod:`tieredstore.store.ops.verify`: ``tieredstore verify`` and Spark's verify
job) all call these, so a queue one of them accepts, the others accept too.

- :func:`record_problem`: a commit-log record against the consume-queue unit
  that points to it (offset, store timestamp, tags hash);
- :func:`unit_order_problem`: a unit that points inside the previous record;
- :func:`record_chain`: sealed segment records one after another (no gap, no
  overlap; a consume-queue record holds one unit per offset; a key-index
  record's offsets only do not go back);
- :func:`scan_records`: the commit-log records from a position on, one after
  another (recovery's re-dispatch and the verifier's check of the tail).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass

from tieredstore.filetype import FileType
from tieredstore.metadata import SegmentRecord
from tieredstore.store.formats.record import (
    HEAD_SIZE,
    UNIT_SIZE,
    CqUnit,
    Message,
    RecordError,
    record_head,
    record_size,
    tags_hash,
)


def record_problem(message: Message, offset: int, unit: CqUnit) -> str | None:
    """What is wrong with a decoded record that ``unit``, offset ``offset``'s,
    points to (None: nothing)."""
    if (message.offset == offset and message.store_timestamp == unit.store_timestamp
            and (unit.tags_hash == 0 if message.tags is None
                 else tags_hash(message.tags) == unit.tags_hash)):
        return None
    differs = [f"{what} {theirs} (its unit says {ours})" for what, theirs, ours in (
        ("offset", message.offset, offset),
        ("store timestamp", message.store_timestamp, unit.store_timestamp),
        ("tags hash", tags_hash(message.tags), unit.tags_hash)) if theirs != ours]
    if not differs:
        return None
    return f"record at commit-log byte {unit.position} holds " + ", ".join(differs)


def unit_order_problem(unit: CqUnit, previous_end: int | None) -> str | None:
    """A unit must point at or after the end of the previous unit's record."""
    if previous_end is None or unit.position >= previous_end:
        return None
    return (f"its unit points to commit-log byte {unit.position}, inside the previous "
            f"record (which ends at {previous_end})")


@dataclass(frozen=True, slots=True)
class ChainProblem:
    offset: int  # the first offset concerned
    text: str


def record_chain(records: Iterable[SegmentRecord], *, file_type: FileType,
                 tail_offset: int | None = None) -> Iterator[ChainProblem]:
    """Sealed segment records of ``file_type`` in order: each starts at the byte
    where the one before ended, and at the offset after its last; a
    consume-queue record holds one unit per offset and starts at its first
    offset's unit. A key index holds entries of keyed messages only (and
    watermarks), so its offsets skip the others, and the entries of one
    message may straddle two segments: a key-index record only must not start
    before the offset the one before ends at. With ``tail_offset`` (all
    records given), the last must end where the active segment starts."""
    if file_type is FileType.INDEX:
        yield from _index_chain(records)
        return
    consume_queue = file_type is FileType.CONSUME_QUEUE
    expected: int | None = None
    position: int | None = None
    what = "consume-queue" if consume_queue else "commit-log"
    for r in records:
        first, last = r.first_message_offset, r.last_message_offset
        count = last - first + 1
        if consume_queue and r.base_offset != first * UNIT_SIZE:
            yield ChainProblem(first, f"consume-queue segment @{r.base_offset} does not start "
                               "at this offset's unit")
        if consume_queue and (r.size != count * UNIT_SIZE or r.message_count != count):
            yield ChainProblem(first, f"consume-queue segment @{r.base_offset} holds {r.size} "
                               f"bytes and {r.message_count} messages for offsets "
                               f"[{first}, {last + 1})")
        if expected is not None and first != expected:
            kind = "gap" if first > expected else "overlap"
            yield ChainProblem(expected, f"{kind} in the {what} metadata: the next segment "
                               f"starts at offset {first}")
        elif position is not None and r.base_offset != position:
            yield ChainProblem(first, f"{what} segment @{r.base_offset} does not start where "
                               f"the one before ends, at byte {position}")
        expected, position = last + 1, r.base_offset + r.size
    if tail_offset is not None and expected is not None and expected != tail_offset:
        yield ChainProblem(expected, f"the last sealed {what} segment ends here, the active "
                           f"one starts at offset {tail_offset}")


def _index_chain(records: Iterable[SegmentRecord]) -> Iterator[ChainProblem]:
    last: int | None = None
    position: int | None = None
    for r in records:
        first = r.first_message_offset
        if last is not None and first < last:
            yield ChainProblem(first, f"overlap in the key-index metadata: segment "
                               f"@{r.base_offset} starts at offset {first}, the one before "
                               f"ends at offset {last}")
        elif position is not None and r.base_offset != position:
            yield ChainProblem(first, f"key-index segment @{r.base_offset} does not start "
                               f"where the one before ends, at byte {position}")
        last, position = r.last_message_offset, r.base_offset + r.size


@dataclass(frozen=True, slots=True)
class Scanned:
    """One whole commit-log record found by :func:`scan_records` (not decoded)."""

    position: int
    data: bytes | memoryview

    @property
    def end(self) -> int:
        return self.position + len(self.data)


@dataclass(frozen=True, slots=True)
class ScanStop:
    """Where :func:`scan_records` stopped before ``end``: ``dead`` if what is left
    is a record cut short at the very end (a crash's dead space), else ``problem``
    says what is wrong at ``position``."""

    position: int
    dead: bool
    problem: str = ""


async def scan_records(read: Callable[[int, int], Awaitable[bytes | memoryview]],
                       segment_end: Callable[[int], Awaitable[int]], position: int, end: int,
                       *, skip_below: int = 0) -> AsyncIterator[Scanned | ScanStop]:
    """The commit-log records from ``position`` up to ``end``, one after another.

    Records never cross a segment's end. A header that is no record's, or a
    record running past its segment's end, stops the scan: as dead space when
    that segment is the last (``end``), as a problem otherwise. Errors of
    ``read`` propagate.

    ``skip_below``: whole records whose offsets are below it are passed over,
    each CRC-checked, up to the first that is not: for a scan from the first
    live commit-log byte because retention took every unit that said where
    the next record starts (docs/writers.md, "Claim")."""
    skipping = skip_below > 0
    while position < end:
        seg_end = await segment_end(position)
        size = 0
        if seg_end - position >= HEAD_SIZE:
            try:
                size = record_size(await read(position, HEAD_SIZE))
            except RecordError as exc:
                yield ScanStop(position, False, f"commit log byte {position}: {exc}")
                return
        if not size or position + size > seg_end:
            if seg_end >= end:
                yield ScanStop(position, True)
            else:
                yield ScanStop(position, False, f"record at commit-log byte {position} runs "
                               f"past the end of its segment at {seg_end}")
            return
        data = await read(position, size)
        if skipping:
            try:
                offset, _ = record_head(data)
            except RecordError as exc:
                yield ScanStop(position, False, f"commit log byte {position}: {exc}")
                return
            if offset < skip_below:
                position += size
                continue
            skipping = False
        yield Scanned(position, data)
        position += size
