"""LogSink: where the pool sends commits smaller than a chunk in write mode ``log``.

In the log mode (docs/format.md, "Log objects") a commit that would make a
chunk smaller than the segment's ``commit_size`` goes to a sink instead of
``commit0``: the sink gathers such commits from every segment into one log
object per group commit. Full chunks still go to ``commit0``. A sink's
``put`` answers like ``commit0``: it returns once the bytes landed (they are
then within the segment's commit position), raises ``CommitFailed`` or
``CommitPositionError`` carrying the position to resume from, or
``SegmentFenced`` once a newer writer took the log over.
"""

from __future__ import annotations

from typing import Protocol

from tieredstore.segment.base import FileSegment


class LogSink(Protocol):
    def accepts(self, segment: FileSegment) -> bool:
        """Whether ``segment``'s small commits may go to the log."""
        ...

    async def put(self, segment: FileSegment, position: int, data: bytes) -> None:
        """Make ``data`` durable at ``position`` of ``segment`` through a log object."""
        ...
