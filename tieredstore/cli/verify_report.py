"""What ``tieredstore verify`` found, per queue, and how it is printed."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from .common import human_bytes, table

KEEP_ERRORS = 50  # per queue; all are counted


@dataclass
class QueueCheck:
    """What verifying one queue found."""

    topic: str
    queue_id: int
    min_offset: int = 0
    max_offset: int = 0
    segments: dict[str, int] = field(default_factory=dict)  # live segments by file type
    messages: int = 0  # records checked through their consume-queue unit
    undispatched: int = 0  # commit-log records after the last unit, checked too
    dead_bytes: int = 0  # commit-log bytes between records (a record torn by a crash)
    units: int = 0  # object units (chunks, merged ranges) fetched and CRC-checked
    bytes: int = 0
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    _run: Unreadable | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.queue_id}"

    def error(self, message: str) -> None:
        self.error_count += 1
        self._run = None
        if len(self.errors) < KEEP_ERRORS:
            self.errors.append(f"{self.name}: {message}")

    def unreadable(self, offset: int, position: int, reason: str) -> None:
        """A record that cannot be read; consecutive ones for one reason (a bad
        unit holds many records) become one line."""
        run = self._run
        if run is None or run.reason != reason or run.last + 1 != offset:
            self.error(f"offset {offset}: record at commit-log byte {position} unreadable: "
                       f"{reason}")
            index = len(self.errors) - 1 if len(self.errors) < KEEP_ERRORS else None
            self._run = Unreadable(offset, offset, position, reason, index)
            return
        self.error_count += 1
        run.last = offset
        if run.index is not None:
            self.errors[run.index] = (
                f"{self.name}: offsets {run.first}..{offset} ({offset - run.first + 1} "
                f"messages): records from commit-log byte {run.position} on unreadable: "
                f"{reason}")


@dataclass
class Unreadable:
    first: int
    last: int
    position: int
    reason: str
    index: int | None  # of its line in ``errors``, if kept


@dataclass
class VerifyReport:
    queues: list[QueueCheck]
    requests: dict[str, dict[str, int | float]]

    @property
    def error_count(self) -> int:
        return sum(q.error_count for q in self.queues)

    @property
    def messages(self) -> int:
        return sum(q.messages + q.undispatched for q in self.queues)



def print_report(report: VerifyReport, *, max_errors: int) -> None:
    rows = [[c.topic, c.queue_id, c.min_offset, c.max_offset,
             f"{c.segments.get('commitlog', 0)}/{c.segments.get('consumequeue', 0)}",
             human_bytes(c.bytes), c.units, c.messages + c.undispatched,
             "ok" if not c.error_count else f"{c.error_count} ERRORS"]
            for c in report.queues]
    print(table(rows, ["topic", "queue", "min", "max", "segs cl/cq", "bytes", "units",
                       "messages", "result"]))
    undispatched = sum(c.undispatched for c in report.queues)
    dead = sum(c.dead_bytes for c in report.queues)
    print(f"queues {len(report.queues)}, messages {report.messages}"
          + (f" ({undispatched} not yet dispatched)" if undispatched else "")
          + (f", dead bytes {dead}" if dead else "")
          + f", errors {report.error_count}")
    if report.error_count:
        shown = [e for c in report.queues for e in c.errors][:max_errors]
        print("first errors:", file=sys.stderr)
        for line in shown:
            print(f"  {line}", file=sys.stderr)
