"""How a head changes: appending, paging out the tail, the first pointer. No IO.

A record is *live* when its base offset is at or past the file type's
``first_base_offset``. A file type with no record yet may still have its
first pointer past 0: a rebuild after lost heads found its earlier segments
deleted by retention (:func:`apply_start`), and its first record begins
there or later. Every function here works on a :class:`pb.QueueHead`
the caller owns (a copy of the committed head), never on the committed one.
"""

from __future__ import annotations

from dataclasses import dataclass

import tieredstore.metadata.metadata_pb2 as pb
from tieredstore.filetype import FileType
from tieredstore.metadata.errors import RecordOrderError
from tieredstore.metadata.format import check_follows, check_record, record_end
from tieredstore.metadata.keys import check_file_type


@dataclass(frozen=True, slots=True)
class First:
    """The first live record of a file type (its base and first message offset);
    when no record is live, where the next one will begin as far as is known."""

    base_offset: int
    message_offset: int


def find_state(head: pb.QueueHead, file_type: int) -> pb.FileState | None:
    for state in head.files:
        if state.file_type == file_type:
            return state
    return None


def state_for_update(head: pb.QueueHead, file_type: FileType) -> pb.FileState:
    """The file type's state in ``head``, added if it has none yet."""
    state = find_state(head, file_type)
    if state is None:
        state = head.files.add(file_type=file_type)
    return state


def has_live(state: pb.FileState) -> bool:
    """Whether any record of this file type is live."""
    return state.HasField("last") and state.last.base_offset >= state.first_base_offset


def is_live(state: pb.FileState, record: pb.SegmentRecord) -> bool:
    return record.base_offset >= state.first_base_offset


def first_of(state: pb.FileState | None) -> First:
    if state is None:
        return First(0, 0)
    return First(state.first_base_offset, state.first_message_offset)


def first_after_all(state: pb.FileState) -> First:
    """The first pointer once every record is trimmed: where the next begins."""
    return First(record_end(state.last), state.last.last_message_offset + 1)


def next_of(state: pb.FileState | None) -> First:
    """Where the next record begins: after the last one appended, live or
    trimmed; before the first, at the first pointer (0, or where a rebuild
    found the file going on, :func:`apply_start`)."""
    if state is not None and state.HasField("last"):
        return first_after_all(state)
    return first_of(state)


def apply_start(head: pb.QueueHead, file_type: FileType, start: First) -> bool:
    """A file type with no record yet begins at ``start``: every segment before
    it is gone (a rebuild after retention deleted them and the heads were
    lost). The first pointer says so, as a trim of every record would: no
    record stands for the deleted span. Returns whether ``head`` changed (a
    file type with records keeps its own first pointer)."""
    state = state_for_update(head, check_file_type(file_type))
    if state.HasField("last") or first_of(state) == start:
        return False
    state.first_base_offset = start.base_offset
    state.first_message_offset = start.message_offset
    return True


def copy_record(record: pb.SegmentRecord) -> pb.SegmentRecord:
    out = pb.SegmentRecord()
    out.CopyFrom(record)
    return out


def page_out_tail(state: pb.FileState) -> list[pb.SegmentRecord]:
    """Move the whole tail out of ``state``; return its records for a page.

    ``paged_through`` moves to the end of the last of them. The caller writes
    the page (or drops it when no record in it is live) before the head.
    """
    tail = [copy_record(r) for r in state.tail]
    if not tail:
        raise ValueError("no tail to page out")
    state.paged_through = record_end(tail[-1])
    state.paged_max_end_timestamp_ms = max(
        state.paged_max_end_timestamp_ms, *(r.end_timestamp_ms for r in tail)
    )
    del state.tail[:]
    return tail


def _same_segment(a: pb.SegmentRecord, b: pb.SegmentRecord) -> bool:
    """Whether two records describe the same sealed segment (when it was sealed aside)."""
    a, b = copy_record(a), copy_record(b)
    a.ClearField("sealed_at_ms")
    b.ClearField("sealed_at_ms")
    return a == b


@dataclass(frozen=True, slots=True)
class Appended:
    """What :func:`apply_append` did: whether the record was new, and the page
    (if any) that must be written before the head."""

    applied: bool
    page: list[pb.SegmentRecord] | None = None


def apply_append(head: pb.QueueHead, record: pb.SegmentRecord) -> Appended:
    """Append ``record`` to ``head``; page out the tail first if it is full.

    A record equal to the last one but for ``sealed_at_ms`` is taken for a
    retry of an append whose outcome was unknown, and changes nothing. A page
    whose records are all trimmed already is dropped instead of written.
    """
    check_record(record)
    file_type = check_file_type(record.file_type)
    state = state_for_update(head, file_type)
    if state.HasField("last"):
        if _same_segment(record, state.last):
            return Appended(applied=False)
        check_follows(state.last, record)
    elif record.base_offset < state.first_base_offset:
        raise RecordOrderError(f"record at base offset {record.base_offset} precedes the "
                               f"file's start at {state.first_base_offset}")
    page: list[pb.SegmentRecord] | None = None
    if len(state.tail) >= head.page_size:
        tail = page_out_tail(state)
        if is_live(state, tail[-1]):
            page = tail
            state.pages_written += 1
    if not has_live(state):
        state.first_base_offset = record.base_offset
        state.first_message_offset = record.first_message_offset
    state.tail.append(record)
    state.last.CopyFrom(record)
    state.appended_count += 1
    return Appended(applied=True, page=page)
