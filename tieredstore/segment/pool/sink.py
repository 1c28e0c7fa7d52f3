"""LogSink: where the pool sends small commits in write mode ``log``.

In the log mode (docs/log-objects.md, "Log objects") a commit that would make a
chunk smaller than the segment's ``commit_size`` and than the pool's
``direct_commit_size`` (S3's 5 MiB part minimum) goes to a sink instead of
``commit0``: the sink gathers such commits from every segment into one log
object per group commit. Full chunks, and partial ones of at least
``direct_commit_size``, still go to ``commit0``. A sink's
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
