"""Verify a store: every message read back, every CRC checked, offsets continuous.

The driver plans every slice of the selected queues (checking the chain of
sealed consume-queue records on the way); one Spark task per slice reads it
all, not strictly: a damaged record is reported and the scan goes on, so one
run names every damaged offset. The driver folds the slice reports into one
row per queue.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tieredstore import sync
from tieredstore.errors import TieredStoreError
from tieredstore.spark.options import ConfigValues, config_of
from tieredstore.spark.plan import NO_END, QueuePlan, SegmentSlice
from tieredstore.spark.scan import SliceScanner, opened


@dataclass(frozen=True, slots=True)
class SliceReport:
    """What reading one slice found."""

    topic: str
    queue_id: int
    first_offset: int  # as planned
    last_offset: int  # as planned (NO_END for an active tail)
    sealed: bool
    messages: int  # read and checked
    units: int  # consume-queue units read: offsets looked at
    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueReport:
    """One queue's verdict (a row of the verify table)."""

    topic: str
    queue_id: int
    segments: int
    messages: int
    first_offset: int
    next_offset: int
    ok: bool
    problems: tuple[str, ...]


def verify_slice(config: ConfigValues, part: SegmentSlice) -> SliceReport:
    """Read a whole slice, reporting (not raising) what is damaged. Runs in a task,
    on an event loop and a store of its own."""
    messages = units = 0
    problems: list[str] = []

    async def scan() -> None:
        nonlocal messages, units
        settings = config_of(config)
        async with opened(settings) as (store, fetcher):
            scanner = SliceScanner(store, fetcher, settings, part, strict=False)
            async for batch in scanner.batches():
                messages += len(batch.messages)
                units += batch.units
                problems.extend(str(e) for e in batch.errors)

    try:
        sync.run(scan())
    except (TieredStoreError, OSError) as exc:
        problems.append(f"{part}: {type(exc).__name__}: {exc}")
    if part.sealed and units != part.last_offset - part.first_offset + 1:
        problems.append(f"{part.topic}/{part.queue_id} offset {part.first_offset + units}: "
                        f"the segment has {units} units for offsets "
                        f"{part.first_offset}..{part.last_offset}")
    return SliceReport(part.topic, part.queue_id, part.first_offset, part.last_offset,
                       part.sealed, messages, units, tuple(problems))


def fold(plans: Sequence[QueuePlan], reports: Iterable[SliceReport]) -> list[QueueReport]:
    """One row per planned queue, in topic and queue order."""
    by_queue: defaultdict[tuple[str, int], list[SliceReport]] = defaultdict(list)
    for report in reports:
        by_queue[(report.topic, report.queue_id)].append(report)
    rows: list[QueueReport] = []
    for plan in sorted(plans, key=lambda p: (p.topic, p.queue_id)):
        slices = sorted(by_queue[(plan.topic, plan.queue_id)], key=lambda r: r.first_offset)
        problems = list(plan.problems)
        expected = plan.first_offset
        next_offset = plan.first_offset
        for report in slices:
            if report.first_offset != expected:
                problems.append(f"{plan.topic}/{plan.queue_id} offset {expected}: no segment "
                                f"holds it (the next starts at {report.first_offset})")
            problems.extend(report.problems)
            end = (report.first_offset + report.units if report.last_offset == NO_END
                   else report.last_offset + 1)
            expected = next_offset = end
        rows.append(QueueReport(
            plan.topic, plan.queue_id, len(slices), sum(r.messages for r in slices),
            plan.first_offset, next_offset, not problems, tuple(problems)))
    return rows
