"""``tieredstore verify``: read every message of every queue and check every CRC.

Read-only. For each queue: the metadata head (read-only) and a listing of
every segment; the segments from the first live position on must follow one
another without a gap and match their metadata records. Then the consume
queue is read front to back, every unit's CRC checked, and each unit's
commit-log record read and checked (record CRC, offset, timestamp, tag hash);
commit-log records after the last unit (not yet dispatched: the next open
re-dispatches them) are checked too. Every unit of every live segment is
fetched once with its CRC32C checked, also where no record points. A queue
whose segments or log pieces no metadata references (its heads are lost) is
reported: its next open, or ``tieredstore repair``, rebuilds it.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.store import (
    UNIT_SIZE,
    BadBytes,
    CqUnit,
    FileType,
    LogSnapshot,
    ObjectStore,
    QueueMetadata,
    RecordCodec,
    RecordError,
    ScanStop,
    SegmentState,
    SegmentView,
    ShortFile,
    UnitStream,
    clean_from,
    decode_record,
    decode_unit,
    list_segments,
    listed_queues,
    load_log,
    open_metadata,
    queues_with_segments,
    record_chain,
    record_problem,
    scan_records,
    unit_order_problem,
)

from .common import (
    EXIT_FAILED,
    EXIT_OK,
    Progress,
    format_requests,
    open_existing_store,
    progress,
    progress_enabled,
    resolve_config,
)
from .verify_report import QueueCheck, VerifyReport, print_report

UNIT_BATCH = 4096  # consume-queue units read at a time
QUEUE_CONCURRENCY = 4


@dataclass
class _Plan:
    """One queue's live segments, checked for structure, ready to read."""

    check: QueueCheck
    meta: QueueMetadata
    live: dict[FileType, list[SegmentView]]
    ends: dict[FileType, int]
    firsts: dict[FileType, int]
    clean_from: int
    codec: RecordCodec | None = None  # opens compressed or encrypted records

    @property
    def total_bytes(self) -> int:
        return sum(v.size for views in self.live.values() for v in views)


async def _plan_queues(store: ObjectStore, config: TieredStoreConfig,
                       queues: list[tuple[str, int]], failed: list[QueueCheck]) -> list[_Plan]:
    """Read the queues' metadata and list their segments; report what does not fit
    together. The consume queues before the commit logs: a writer dispatches a
    unit only after the commit-log bytes it points to are stored, so every unit
    listed points into what the later commit-log listing holds, with the log
    loaded again in between (docs/format.md, "Reading the log")."""
    limit = asyncio.Semaphore(QUEUE_CONCURRENCY)

    async def plan_one(t: str, q: int, log: LogSnapshot) -> _Plan | None:
        async with limit:
            try:
                return await _plan_queue(store, config, t, q, log)
            except TieredStoreError as exc:
                check = QueueCheck(t, q)
                check.error(f"cannot read the queue's metadata: {exc}")
                failed.append(check)
                return None

    async def list_rest(plan: _Plan, log: LogSnapshot) -> _Plan | None:
        async with limit:
            try:
                for file_type in (FileType.COMMIT_LOG, FileType.INDEX):
                    await _plan_file(store, config, plan, file_type, log)
            except TieredStoreError as exc:
                plan.check.error(f"cannot list the queue's segments: {exc}")
                failed.append(plan.check)
                return None
        return plan

    log = await load_log(store, config)
    plans = [p for p in await asyncio.gather(*(plan_one(t, q, log) for t, q in queues)) if p]
    log = await load_log(store, config)
    return [p for p in await asyncio.gather(*(list_rest(p, log) for p in plans)) if p]


async def _plan_queue(store: ObjectStore, config: TieredStoreConfig, topic: str,
                      queue_id: int, log: LogSnapshot) -> _Plan:
    """A queue's metadata, and its consume queue listed after ``log`` was loaded."""
    meta = await open_metadata(store, config, topic, queue_id)
    plan = _Plan(QueueCheck(topic, queue_id), meta, {}, {}, {}, clean_from(meta.properties),
                 RecordCodec.from_config(config, strict=False))
    await _plan_file(store, config, plan, FileType.CONSUME_QUEUE, log)
    plan.check.min_offset = plan.firsts[FileType.CONSUME_QUEUE] // UNIT_SIZE
    plan.check.max_offset = plan.ends[FileType.CONSUME_QUEUE] // UNIT_SIZE
    return plan


async def _plan_file(store: ObjectStore, config: TieredStoreConfig, plan: _Plan,
                     file_type: FileType, log: LogSnapshot) -> None:
    """List one flat file's segments (after ``log`` was loaded) against its records."""
    check, meta = plan.check, plan.meta
    topic, queue_id = check.topic, check.queue_id
    views = await list_segments(store, config, topic, queue_id, file_type, log=log)
    by_base = {v.base: v for v in views}
    next_base = meta.next_base_offset(file_type)
    first = min(meta.first(file_type).base_offset, next_base)
    records = [r async for r in meta.records(file_type)]
    for problem in record_chain(records, file_type=file_type):
        check.error(f"offset {problem.offset}: {problem.text}")
    for record in records:
        view = by_base.get(record.base_offset)
        where = f"{file_type.label} segment at {record.base_offset}"
        if view is None:
            check.error(f"{where} is recorded in the metadata but has no objects")
            continue
        view.record = record
        if view.state is SegmentState.OPEN:
            check.error(f"{where} is recorded as sealed but is not sealed")
        elif view.state is not None and view.size != record.size:
            check.error(f"{where} holds {view.size} bytes, its record says {record.size}")
    live = [v for v in views if v.base >= first]
    expected = first
    for view in live:
        if view.base != expected:
            what = "missing" if view.base > expected else "overlapping"
            check.error(f"{file_type.label} bytes [{min(expected, view.base)}, "
                        f"{max(expected, view.base)}) are {what} before segment {view.path}")
        if view.state is None:
            check.error(f"{file_type.label} segment {view.path} is corrupt: {view.error}")
        for key in view.foreign:
            check.error(f"foreign object {key!r} in segment {view.path}: not written by "
                        "tieredstore; ignored (move it away)")
        expected = view.end
    plan.live[file_type] = live
    plan.firsts[file_type] = first
    plan.ends[file_type] = expected
    check.segments[file_type.label] = len(live)


async def _read_queue(store: ObjectStore, plan: _Plan, bar: Progress) -> None:
    """Read every unit and record of a planned queue."""
    check = plan.check
    cq = UnitStream(store, plan.live[FileType.CONSUME_QUEUE], bar.update)
    cl = UnitStream(store, plan.live[FileType.COMMIT_LOG], bar.update)
    try:
        cl_first, cl_end = plan.firsts[FileType.COMMIT_LOG], plan.ends[FileType.COMMIT_LOG]
        cq_first, cq_end = plan.firsts[FileType.CONSUME_QUEUE], plan.ends[FileType.CONSUME_QUEUE]
        if cq_end % UNIT_SIZE:
            check.error(f"the consume queue ends at byte {cq_end}, inside a unit")
        position: int | None = None  # where the next record may start
        tail_known = True  # whether position is where the last unit's record ends
        offset = cq_first // UNIT_SIZE
        while offset < check.max_offset:
            count = min(UNIT_BATCH, check.max_offset - offset)
            units = await _read_units(cq, check, offset, count)
            for i, unit in enumerate(units):
                tail_known = unit is not None
                if unit is None:
                    position = None  # the next unit's record starts who knows where
                    continue
                position = await _check_unit(cl, plan, offset + i, unit, position=position,
                                             cl_first=cl_first)
            offset += count
        if tail_known:
            # No unit read: the tail is found from the first live commit-log
            # byte, past records whose units expired (as recovery finds it).
            start, behind = (cl_first, True) if position is None else (position, False)
            await _check_tail(cl, plan, max(start, plan.clean_from), cl_end, behind=behind)
        for stream, what in ((cq, "consumequeue"), (cl, "commitlog")):
            for bad in await stream.finish():
                check.error(f"{what} bytes [{bad.start}, {bad.end}) (no message read "
                            f"them): {bad.reason}")
            check.units += stream.units_checked
            check.bytes += stream.bytes_read
    finally:
        await cq.close()
        await cl.close()


async def _read_units(cq: UnitStream, check: QueueCheck, offset: int, count: int
                      ) -> list[CqUnit | None]:
    """The units of ``count`` offsets from ``offset``; None for one that cannot be
    read. A damaged range is reported once: the store rebuilds its units from
    the commit log, but the bucket is damaged."""
    try:
        data, bad = await cq.read_around(offset * UNIT_SIZE, count * UNIT_SIZE)
    except (BadBytes, ShortFile) as exc:
        check.error(f"offsets {offset}..{offset + count - 1}: consume-queue units "
                    f"unreadable: {exc}")
        return [None] * count
    out: list[CqUnit | None] = []
    for i in range(count):
        at = (offset + i) * UNIT_SIZE
        if any(b.start < at + UNIT_SIZE and at < b.end for b in bad):
            out.append(None)
            continue
        try:
            out.append(decode_unit(data, i * UNIT_SIZE))
        except RecordError as exc:
            check.error(f"offset {offset + i}: consume-queue unit: {exc}")
            out.append(None)
    for b in bad:
        first, last = max(offset, b.start // UNIT_SIZE), \
            min(offset + count, -(-b.end // UNIT_SIZE)) - 1
        check.error(f"offsets {first}..{last}: consume-queue units unreadable (the store "
                    f"rebuilds them from the commit log): {b.reason}")
    return out


async def _check_unit(cl: UnitStream, plan: _Plan, offset: int, unit: CqUnit, *,
                      position: int | None, cl_first: int) -> int | None:
    """Check the record one unit points to; returns where the next record may start
    (``position`` None: no record checked yet, the commit log may hold trimmed
    offsets' records before this one)."""
    check = plan.check
    if position is None and unit.position < cl_first:
        check.error(f"offset {offset}: its unit points to commit-log byte {unit.position}, "
                    "before the first live byte")
        return position
    order = unit_order_problem(unit, position)
    if order is not None:
        check.error(f"offset {offset}: {order}")
        return position
    if position is not None:
        check.dead_bytes += unit.position - position
    try:
        data = await cl.read(unit.position, unit.size)
    except (BadBytes, ShortFile) as exc:
        check.unreadable(offset, unit.position, str(exc))
        return unit.end
    try:
        message = decode_record(data, check.topic, check.queue_id, plan.codec)
    except RecordError as exc:
        check.error(f"offset {offset}: record at commit-log byte {unit.position}: {exc}")
        return unit.end
    problem = record_problem(message, offset, unit)
    if problem is not None:
        check.error(f"offset {offset}: {problem}")
    else:
        check.messages += 1
    return unit.end


async def _check_tail(cl: UnitStream, plan: _Plan, position: int, end: int, *,
                      behind: bool) -> None:
    """Records after the last unit: what the next open would re-dispatch
    (``behind``: ``position`` is not where the last unit's record ends, and
    records before the consume queue's end are passed over)."""
    check = plan.check
    offset = check.max_offset
    segment_ends = [v.end for v in plan.live[FileType.COMMIT_LOG]]

    async def segment_end(at: int) -> int:
        return next((e for e in segment_ends if e > at), end)

    try:
        async for found in scan_records(cl.read, segment_end, position, end,
                                        skip_below=offset if behind else 0):
            if isinstance(found, ScanStop):
                if found.dead:  # cut short by a crash at the very end: dead space
                    check.dead_bytes += end - found.position
                else:
                    check.error(found.problem)
                return
            message = decode_record(found.data, check.topic, check.queue_id, plan.codec)
            if message.offset != offset:
                check.error(f"commit-log byte {found.position} holds offset "
                            f"{message.offset}, expected {offset}")
                return
            check.undispatched += 1
            offset += 1
            position = found.end
    except (BadBytes, ShortFile, RecordError) as exc:
        check.error(f"offset {offset} (not yet dispatched): commit-log byte {position}: {exc}")


async def verify_store(store: ObjectStore, config: TieredStoreConfig, *,
                       show_progress: bool = False, topic: str | None = None,
                       queue_id: int | None = None) -> VerifyReport:
    """Verify every queue (or the one named); never writes."""
    found = await listed_queues(store, config)
    found = [(t, q) for t, q in found
             if (topic is None or t == topic) and (queue_id is None or q == queue_id)]
    limit = asyncio.Semaphore(QUEUE_CONCURRENCY)
    failed: list[QueueCheck] = []
    orphans = {key: count for key, count in (await queues_with_segments(store, config)).items()
               if key not in found and (topic is None or key[0] == topic)
               and (queue_id is None or key[1] == queue_id)}
    if orphans:  # a queue created since the first listing has its head by now
        orphans = {key: count for key, count in orphans.items()
                   if key not in set(await listed_queues(store, config))}
    for (t, q), count in orphans.items():
        check = QueueCheck(t, q)
        check.error(f"{count} segment(s) in the bucket but no queue metadata references "
                    "them: the next open of the queue, or `tieredstore repair`, rebuilds it")
        failed.append(check)
    plans = await _plan_queues(store, config, found, failed)
    with progress(show_progress, total=sum(p.total_bytes for p in plans), desc="verify",
                  unit="B") as bar:

        async def read_one(plan: _Plan) -> None:
            async with limit:
                await _read_queue(store, plan, bar)

        await asyncio.gather(*(read_one(p) for p in plans))
        # A writer that went on during the check (rolled, merged, trimmed) can make a
        # snapshot look inconsistent: a queue with errors is checked once more, and
        # what that second look finds is the report (real damage shows again).
        # A queue whose planning fails now has its report in ``failed``.
        retry = [(p.check.topic, p.check.queue_id) for p in plans if p.check.error_count]
        again = await _plan_queues(store, config, retry, failed) if retry else []
        await asyncio.gather(*(read_one(p) for p in again))
        final = [*(p for p in plans if not p.check.error_count), *again]
    checks = sorted([*(p.check for p in final), *failed], key=lambda c: (c.topic, c.queue_id))
    return VerifyReport(checks, store.metrics.snapshot())


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("verify", parents=[common], help="read every message and check "
                            "every CRC (read-only); exit 1 on any error",
                            description=__doc__)
    parser.add_argument("--topic", help="only this topic")
    parser.add_argument("--queue", type=int, help="only this queue id")
    parser.add_argument("--max-errors", type=int, default=20, metavar="N",
                        help="errors to print (all are counted; default 20)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = resolve_config(args)

    async def main() -> VerifyReport:
        store = open_existing_store(config)
        try:
            return await verify_store(store, config, show_progress=progress_enabled(args),
                                      topic=args.topic, queue_id=args.queue)
        finally:
            await store.close()

    report = sync.run(main())
    print_report(report, max_errors=args.max_errors)
    print(f"requests: {format_requests(report.requests)}")
    return EXIT_FAILED if report.error_count else EXIT_OK
