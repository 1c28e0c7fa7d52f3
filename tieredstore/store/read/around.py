"""Reading around damage: ``get`` that steps over what cannot be read, and says so.

``get`` is strict: it returns the messages before the first record it cannot
read, and the next call, from there, raises the error that names it. A
consumer that must go on past damage reads with ``get_around_damage``
instead: the same offsets, the same checks, through the same scan
(:class:`~tieredstore.store.read.scan.QueueScan`, reporting each problem as ``verify``'s does),
and an answer (:class:`AroundDamage`) that holds the messages read, every
range of offsets stepped over (:class:`Skipped`, with the reason and the
segment), and where the next read starts. Its rules:

- A commit-log record that cannot be read or fails a check (its unit's
  CRC32C, its own, its offset, topic, queue, size, its unit's tags hash) is
  stepped over, its offset alone: the next offset's consume-queue unit says
  where the next record starts.
- Consume-queue units that cannot be read are rebuilt from the commit log, as
  ``get`` rebuilds them (from the end of the unit before, each record read and
  checked); those whose records cannot be read either are stepped over.
- Never wrong bytes: a message returned passed every check a strict ``get``
  makes; nothing is returned that a strict ``get`` would not return.
- Never silent: every offset from the first asked to ``next_offset`` is
  either a message or in a :class:`Skipped` range.
- What is not damage in the bucket (an outage, a closed store, a refused
  request) is raised as ``get`` raises it: after the messages and ranges
  before it (the next call, from there, raises it), never stepped over.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tieredstore.errors import SegmentError, TieredStoreError
from tieredstore.store.formats.record import Message
from tieredstore.store.read.scan import QueueScan, ScanError, as_raised, is_damage


@dataclass(frozen=True, slots=True)
class Skipped:
    """Offsets ``[first_offset, end_offset)`` a read stepped over, and why."""

    first_offset: int
    end_offset: int
    reason: str  # what is wrong, naming the bytes (segment and byte range, or record)
    segment: str = ""  # the damaged segment, when the error names one

    def __str__(self) -> str:
        span = (f"offset {self.first_offset}" if self.end_offset == self.first_offset + 1
                else f"offsets [{self.first_offset}, {self.end_offset})")
        return f"{span}: {self.reason}"


@dataclass(frozen=True, slots=True)
class AroundDamage:
    """What a read around damage found: the messages read, in offset order, the
    ranges stepped over (in offset order, never overlapping a message), and
    where the next read starts."""

    messages: list[Message]
    skipped: list[Skipped]
    next_offset: int


def skipped(error: ScanError) -> Skipped:
    cause = error.__cause__
    segment = error.segment or (cause.segment if isinstance(cause, SegmentError) else "")
    return Skipped(error.offset, error.last_offset + 1, error.problem, segment)


async def read_around(scan: QueueScan) -> AroundDamage:
    """The messages and the damage a scan that is not strict found (see the
    module's rules)."""
    assert not scan.mode.strict
    messages: list[Message] = []
    steps: list[Skipped] = []
    stop: TieredStoreError | None = None  # not damage: where this read ends
    end = scan.spec.end
    try:
        async for batch in scan.batches():
            messages.extend(batch.messages)
            for error in batch.errors:
                if not is_damage(error.__cause__):
                    stop, end = as_raised(error), error.offset
                    break
                steps.append(skipped(error))
            if stop is not None:
                break
    except ScanError as exc:  # the scan could not go on: not damage it could step over
        stop, end = as_raised(exc), exc.offset
        messages.extend(scan.current.messages)
    if stop is None or end is None:
        end = scan.next_offset
    messages = [m for m in messages if m.offset < end]
    ranges = _merged(s for s in steps if s.first_offset < end)
    ranges = [s if s.end_offset <= end else Skipped(s.first_offset, end, s.reason, s.segment)
              for s in ranges]
    if stop is not None and not messages and not ranges:
        raise stop
    return AroundDamage(messages, ranges, end)


def _merged(steps: Iterable[Skipped]) -> list[Skipped]:
    """Neighbouring ranges stepped over for one reason, as one range."""
    out: list[Skipped] = []
    for step in sorted(steps, key=lambda s: s.first_offset):
        last = out[-1] if out else None
        if last is not None and last.end_offset == step.first_offset and \
                (last.reason, last.segment) == (step.reason, step.segment):
            out[-1] = Skipped(last.first_offset, step.end_offset, last.reason, last.segment)
        else:
            out.append(step)
    return out
