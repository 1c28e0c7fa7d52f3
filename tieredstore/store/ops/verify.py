"""Verify a queue: read every message and check every CRC, read-only.

One verifier, rendered by ``tieredstore verify`` and Spark's verify job:

- the metadata head (read-only) and a listing of every segment of each flat
  file: from the first live position on they must follow one another without
  a gap and match their metadata records (:func:`record_chain` too); the
  consume queue is listed before the commit log, with the broker's log loaded
  again in between (docs/log-objects.md, "Reading the log");
- the queue's :class:`~tieredstore.store.read.scan.QueueScan` (``for_check``): every
  consume-queue unit and the record it points to checked, damage read around
  and reported;
- commit-log records after the last unit (not yet dispatched: the next open
  re-dispatches them), each checked;
- every unit of every live commit-log and consume-queue segment that no read
  fetched (dead space after a crash, a segment's unused tail) fetched once,
  so that every stored CRC is checked.

A queue whose segments or log pieces no metadata references (its heads are
lost) is reported by :func:`verify_store`: its next open, or ``tieredstore
repair``, rebuilds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.filetype import FileType
from tieredstore.log import LogSnapshot
from tieredstore.metadata import QueueMetadata
from tieredstore.metrics import MetricsServer, TieredStoreCollector
from tieredstore.objectstore import MAX_LIST_PAGE, ObjectInfo, ObjectStore
from tieredstore.segment import ChunkRef, SegmentLayout, SegmentPath, SegmentReader, SegmentState
from tieredstore.store.base.compose import request_prices
from tieredstore.store.formats.codec import RecordCodec
from tieredstore.store.formats.properties import clean_from, index_from
from tieredstore.store.formats.record import UNIT_SIZE
from tieredstore.store.ops.summary import segment_count
from tieredstore.store.read.checks import ScanStop, record_chain
from tieredstore.store.read.queue_view import queue_files, reading_fetcher
from tieredstore.store.read.scan import QueueScan, ScanSpec
from tieredstore.store.read.tail import TailStart, tail_records, tail_start
from tieredstore.store.read.view import (
    FlatView,
    SegmentView,
    list_recorded,
    listed_queues,
    load_log,
    open_metadata,
)
from tieredstore.store.write.recovery import queues_with_segments, store_keys
from tieredstore.tasks import gather_bounded

QUEUE_CONCURRENCY = 4
KEEP_ERRORS = 50  # per queue; all are counted


@dataclass
class QueueCheck:
    """What verifying one queue found: the one report of a queue, whoever
    verified it (``tieredstore verify``, Spark's verify job), shown as
    :meth:`document`.

    Offsets ``[min_offset, max_offset)``: the consume queue's first live
    offset and the offset after its last unit (``max_offset`` exclusive, as
    the store's ``max_offset`` is). ``undispatched`` commit-log records follow
    ``max_offset``, checked too; ``records`` counts both."""

    topic: str
    queue_id: int
    min_offset: int = 0
    max_offset: int = 0
    segments: int = 0  # the queue's segments, as QueueSummary.segments counts them
    messages: int = 0  # records checked through their consume-queue unit
    undispatched: int = 0  # commit-log records after the last unit, checked too
    dead_bytes: int = 0  # commit-log bytes between records (a record torn by a crash)
    units: int = 0  # object units (chunks, merged ranges) fetched and CRC-checked
    bytes: int = 0
    errors: list[str] = field(default_factory=list)  # "topic/queue: what", the first ones
    error_count: int = 0
    broker: str = ""  # the broker whose queue it is

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.queue_id}"

    @property
    def records(self) -> int:
        """Every commit-log record checked: dispatched or not."""
        return self.messages + self.undispatched

    def error(self, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < KEEP_ERRORS:
            self.errors.append(f"{self.name}: {message}")

    def document(self) -> dict[str, object]:
        """The queue as ``--json`` shows it (and Spark's verify DataFrame, with
        ``queue`` as ``queue_id``), in this order: ``broker``, ``topic``,
        ``queue``, ``min_offset``, ``max_offset``, ``segments``, ``messages``
        (:attr:`records`), ``undispatched``, ``dead_bytes``, ``units``,
        ``checked_bytes``, ``error_count``, ``errors`` (the first ones)."""
        return {"broker": self.broker, "topic": self.topic, "queue": self.queue_id,
                "min_offset": self.min_offset, "max_offset": self.max_offset,
                "segments": self.segments, "messages": self.records,
                "undispatched": self.undispatched, "dead_bytes": self.dead_bytes,
                "units": self.units, "checked_bytes": self.bytes,
                "error_count": self.error_count, "errors": list(self.errors)}


@dataclass
class VerifyReport:
    """What verifying queues found: a check per queue, and the requests made
    (a :class:`~tieredstore.objectstore.RequestMetrics` snapshot)."""

    queues: list[QueueCheck]
    requests: dict[str, dict[str, int | float]]

    def document(self) -> dict[str, object]:
        """The report as ``--json`` shows it: ``queues`` (each as
        :meth:`QueueCheck.document`), ``messages``, ``error_count`` and
        ``requests`` (count by operation)."""
        return {"queues": [c.document() for c in self.queues], "messages": self.messages,
                "error_count": self.error_count,
                "requests": dict(self.requests.get("requests", {}))}

    @property
    def error_count(self) -> int:
        return sum(q.error_count for q in self.queues)

    @property
    def messages(self) -> int:
        return sum(q.records for q in self.queues)


class _Counted:
    """A :class:`SegmentReader` that notes the units each read touches (each
    counted once, when first read back whole and checked)."""

    def __init__(self, inner: SegmentReader, check: QueueCheck,
                 on_bytes: Callable[[int], None]) -> None:
        self.inner = inner
        self.check = check
        self.on_bytes = on_bytes
        self.asked: set[tuple[str, int]] = set()
        self._counted: set[tuple[str, int]] = set()

    def was_read(self, unit: ChunkRef) -> bool:
        return (unit.key, unit.object_offset) in self.asked

    async def read(self, path: SegmentPath, layout: SegmentLayout, position: int, length: int
                   ) -> bytes | memoryview:
        units = [s.unit for s in layout.slices(position, length)] if length > 0 else []
        self.asked.update((u.key, u.object_offset) for u in units)
        data = await self.inner.read(path, layout, position, length)
        for u in units:
            if (u.key, u.object_offset) not in self._counted:
                self._counted.add((u.key, u.object_offset))
                self.check.units += 1
                self.check.bytes += u.length
                self.on_bytes(u.length)
        return data

    async def read_span(self, path: SegmentPath, layout: SegmentLayout, position: int,
                        length: int) -> bytes:
        return await self.inner.read_span(path, layout, position, length)

    def committed(self, path: SegmentPath, unit: ChunkRef, data: bytes) -> None:
        self.inner.committed(path, unit, data)

    def forget(self, path: SegmentPath) -> None:
        self.inner.forget(path)

    def replaced(self, path: SegmentPath, old: SegmentLayout, new: SegmentLayout) -> None:
        self.inner.replaced(path, old, new)


@dataclass
class _Listed:
    """One flat file's live segments, as listed, and where they start and end."""

    views: list[SegmentView]  # every segment listed, trimmed ones too
    live: list[SegmentView]
    first: int
    end: int
    segments: int  # as QueueSummary.segments counts them


async def _list_file(store: ObjectStore, config: TieredStoreConfig, check: QueueCheck,
                     meta: QueueMetadata, file_type: FileType, *,
                     log: LogSnapshot, keys: Sequence[ObjectInfo] | None) -> _Listed:
    """List one flat file's segments against its records (from ``keys``, a
    listing of the store made after ``log`` was loaded, if given); report what
    does not fit."""
    listed = await list_recorded(store, config, meta, file_type, log=log, keys=keys)
    views, records, first = listed.views, listed.records, listed.first
    for problem in record_chain(records, file_type=file_type):
        check.error(f"offset {problem.offset}: {problem.text}")
    by_base = {v.base: v for v in views}
    for record in records:
        view = by_base.get(record.base_offset)
        where = f"{file_type.label} segment at {record.base_offset}"
        if view is None:
            check.error(f"{where} is recorded in the metadata but has no objects")
            continue
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
    next_base = meta.next_base_offset(file_type)
    return _Listed(views, live, first, expected, segment_count(
        (v.base for v in live), (v.size for v in live if v.base >= next_base), first,
        next_base))


@dataclass
class _Planned:
    """A queue's metadata, and its consume queue as listed (None: it could not be)."""

    check: QueueCheck
    meta: QueueMetadata
    cq: _Listed | None = None


async def _metadata(store: ObjectStore, config: TieredStoreConfig, topic: str,
                    queue_id: int) -> _Planned:
    """The queue's metadata, read (what that raises is raised)."""
    return _Planned(QueueCheck(topic, queue_id, broker=config.broker),
                    await open_metadata(store, config, topic, queue_id))


async def _list_consume_queue(store: ObjectStore, config: TieredStoreConfig, planned: _Planned,
                              log: LogSnapshot, keys: Sequence[ObjectInfo] | None) -> None:
    """List the queue's consume queue after ``log`` was loaded (from ``keys``, a
    listing of the store made after it, if given)."""
    try:
        planned.cq = await _list_file(store, config, planned.check, planned.meta,
                                      FileType.CONSUME_QUEUE, log=log, keys=keys)
    except TieredStoreError as exc:
        planned.check.error(f"cannot list the queue's segments: {exc}")


async def verify_queue(store: ObjectStore, config: TieredStoreConfig, topic: str,
                       queue_id: int, *, log: LogSnapshot | None = None,
                       on_bytes: Callable[[int], None] = lambda n: None) -> QueueCheck:
    """Verify one queue (see the module's docstring); never writes. ``log``: the
    broker's log as loaded before this call (loaded here if None); it is loaded
    again once the consume queue is listed. Every problem is in the returned
    check; only what reading the queue's metadata raises (:class:`NoSuchQueue`:
    it has none) is raised."""
    log = await load_log(store, config) if log is None else log
    planned = await _metadata(store, config, topic, queue_id)
    await _list_consume_queue(store, config, planned, log, None)
    return await _verify(store, config, planned, await load_log(store, config), on_bytes)


async def _verify(store: ObjectStore, config: TieredStoreConfig, planned: _Planned,
                  log: LogSnapshot, on_bytes: Callable[[int], None], *,
                  keys: Sequence[ObjectInfo] | None = None) -> QueueCheck:
    """The rest of :func:`verify_queue`, with ``log`` loaded after the consume
    queue was listed (and ``keys``, if given, listed after ``log``)."""
    check, meta, cq_file = planned.check, planned.meta, planned.cq
    topic, queue_id = check.topic, check.queue_id
    if cq_file is None:
        return check
    try:
        cl_file = await _list_file(store, config, check, meta, FileType.COMMIT_LOG, log=log,
                                   keys=keys)
        index = await _list_file(store, config, check, meta, FileType.INDEX, log=log,
                                 keys=keys)
    except TieredStoreError as exc:
        check.error(f"cannot list the queue's segments: {exc}")
        return check
    check.segments = cq_file.segments + cl_file.segments + (
        index.segments if index_from(meta.properties) is not None else 0)
    check.min_offset, check.max_offset = cq_file.first // UNIT_SIZE, cq_file.end // UNIT_SIZE
    if cq_file.end % UNIT_SIZE:
        check.error(f"the consume queue ends at byte {cq_file.end}, inside a unit")
    fetcher = reading_fetcher(store, config)
    reader = _Counted(fetcher, check, on_bytes)
    codec = RecordCodec.from_config(config, strict=False)
    try:
        cl, cq = queue_files(store, config, topic, queue_id, records=(meta, meta),
                             reader=reader, log=log, listed=(cl_file.views, cq_file.views))
        scan = QueueScan(ScanSpec.for_check(topic, queue_id, check.min_offset,
                                            check.max_offset, codec=codec), cl=cl, cq=cq)
        try:
            async for batch in scan.batches():
                check.messages += len(batch.messages)
                for problem in batch.errors:
                    check.error(problem.text)
        except TieredStoreError as exc:
            check.error(f"offset {scan.last_read + 1}: {exc}")
        check.dead_bytes += scan.dead_bytes
        if scan.record_end is not None or check.max_offset == check.min_offset:
            # No unit read: the tail is found from the first live commit-log byte,
            # past records whose units expired (as recovery finds it).
            await _check_tail(cl, check, codec, cl_file.end, tail_start(
                check.max_offset, scan.record_end, first=cl_file.first,
                clean_from=clean_from(meta.properties)))
        for flat, listed in ((cq, cq_file), (cl, cl_file)):
            await _read_the_rest(flat, listed, reader, check)
    finally:
        await fetcher.close()
    return check


async def _check_tail(cl: FlatView, check: QueueCheck, codec: RecordCodec | None, end: int,
                      start: TailStart) -> None:
    """Records after the last unit, up to commit-log byte ``end``: what the next
    open would re-dispatch (:mod:`tieredstore.store.read.tail`)."""
    position = start.position
    try:
        async for found in tail_records(cl, start, end, codec=codec):
            if isinstance(found, ScanStop):
                if found.dead:  # cut short by a crash at the very end: dead space
                    check.dead_bytes += end - found.position
                else:
                    check.error(found.problem)
                return
            check.undispatched += 1
            position = found.end
    except TieredStoreError as exc:
        check.error(f"offset {start.offset + check.undispatched} (not yet dispatched): "
                    f"commit-log byte {position}: {exc}")


async def _read_the_rest(flat: FlatView, listed: _Listed, reader: _Counted,
                         check: QueueCheck) -> None:
    """Fetch every unit of the live segments that no read fetched, each checked."""
    for view in listed.live:
        if view.state is None:
            continue  # reported as corrupt
        for unit in view.layout.units:
            if reader.was_read(unit):
                continue
            try:
                await flat.read(view.base + unit.position, unit.length)
            except TieredStoreError as exc:
                check.error(f"{flat.file_type.label} bytes [{view.base + unit.position}, "
                            f"{view.base + unit.end}) (no message read them): {exc}")


async def verify_store(store: ObjectStore, config: TieredStoreConfig, *,
                       topic: str | None = None, queue_id: int | None = None,
                       on_bytes: Callable[[int], None] = lambda n: None,
                       brokers: Sequence[str] | None = None) -> VerifyReport:
    """:func:`verify_queue` for every queue (or the one named), and the queues
    whose segments no metadata references; never writes. ``brokers``: of these
    brokers of ``config``'s cluster (None: ``config.broker``), the whole
    store's keys listed once for all. With ``metrics_port``
    set, ``store``'s requests, bytes and their cost are served there while it
    runs (``tieredstore verify --metrics-port``)."""
    configs = [config.replace(broker=b) for b in brokers] if brokers is not None else [config]
    if not config.metrics_port:
        return await _verify_brokers(store, configs, topic, queue_id, on_bytes)
    server = MetricsServer.start(
        TieredStoreCollector(store=store.metrics, prices=request_prices(config)),
        config.metrics_host, config.metrics_port)
    try:
        return await _verify_brokers(store, configs, topic, queue_id, on_bytes)
    finally:
        server.stop()


async def _verify_brokers(store: ObjectStore, configs: Sequence[TieredStoreConfig],
                          topic: str | None, queue_id: int | None,
                          on_bytes: Callable[[int], None]) -> VerifyReport:
    """Every broker at once, in the order reading needs (docs/log-objects.md,
    "Reading the log"): each broker's queues (heads listed), its log loaded and
    each queue's metadata read; then one listing of every key, which finds the
    segments no metadata references (of every broker) and holds every queue's
    consume queue; each log loaded again, then a second listing of every key for
    the commit logs and key indexes, unless it takes more pages than a LIST of
    each queue's two would. A queue with errors is looked at once more on its
    own (:func:`_look_again`)."""
    def chosen(t: str, q: int) -> bool:
        return (topic is None or t == topic) and (queue_id is None or q == queue_id)

    founds = [[(t, q) for t, q in await listed_queues(store, c) if chosen(t, q)]
              for c in configs]
    logs = [await load_log(store, c) for c in configs]
    planned = [await _plan_all(store, c, found) for c, found in zip(configs, founds, strict=True)]
    keys = await store_keys(store, configs[0]) if configs else []
    checks: list[QueueCheck] = []
    for c, found, log, plans in zip(configs, founds, logs, planned, strict=True):
        segments = await queues_with_segments(store, c, log=log, keys=keys)
        checks += await _orphans(store, c, {key: count for key, count in segments.items()
                                            if key not in found and chosen(*key)})
        await _list_consume_queues(store, c, plans, log, keys)
    logs = [await load_log(store, c) for c in configs]
    pages = -(-len(keys) // MAX_LIST_PAGE)
    again = await store_keys(store, configs[0]) \
        if pages < 2 * sum(map(len, founds)) else None
    for c, log, plans in zip(configs, logs, planned, strict=True):
        looked = await _verify_planned(store, c, plans, log, on_bytes, keys=again)
        # A writer that went on during the check (rolled, merged, trimmed) can make
        # a snapshot look inconsistent: a queue with errors is looked at once more
        # on its own, and what that finds is the report (real damage shows again).
        retry = [(x.topic, x.queue_id) for x in looked if x.error_count]
        checks += [x for x in looked if not x.error_count]
        checks += await _look_again(store, c, retry, on_bytes) if retry else []
    return VerifyReport(sorted(checks, key=lambda c: (c.broker, c.topic, c.queue_id)),
                        store.metrics.snapshot())


async def _plan_all(store: ObjectStore, config: TieredStoreConfig,
                    queues: Sequence[tuple[str, int]]) -> list[_Planned | QueueCheck]:
    """Each queue's metadata, or its check saying it could not be read."""
    async def plan(queue: tuple[str, int]) -> _Planned | QueueCheck:
        try:
            return await _metadata(store, config, *queue)
        except TieredStoreError as exc:  # gone since the listing
            check = QueueCheck(*queue, broker=config.broker)
            check.error(f"cannot read the queue's metadata: {exc}")
            return check

    return await gather_bounded(QUEUE_CONCURRENCY, plan, queues)


async def _list_consume_queues(store: ObjectStore, config: TieredStoreConfig,
                               plans: Sequence[_Planned | QueueCheck], log: LogSnapshot,
                               keys: Sequence[ObjectInfo] | None) -> None:
    """:func:`_list_consume_queue` of each queue planned."""
    async def one(p: _Planned) -> None:
        await _list_consume_queue(store, config, p, log, keys)

    await gather_bounded(QUEUE_CONCURRENCY, one, [p for p in plans if isinstance(p, _Planned)])


async def _orphans(store: ObjectStore, config: TieredStoreConfig,
                   orphans: dict[tuple[str, int], int]) -> list[QueueCheck]:
    """A check for each queue of ``orphans`` whose segments no metadata references."""
    if orphans:  # a queue created since the first listing has its head by now
        orphans = {key: count for key, count in orphans.items()
                   if key not in set(await listed_queues(store, config))}
    failed: list[QueueCheck] = []
    for (t, q), count in orphans.items():
        check = QueueCheck(t, q, broker=config.broker)
        check.error(f"{count} segment(s) in the bucket but no queue metadata references "
                    "them: the next open of the queue, or `tieredstore repair`, rebuilds it")
        failed.append(check)
    return failed


async def _verify_planned(store: ObjectStore, config: TieredStoreConfig,
                          plans: Sequence[_Planned | QueueCheck], log: LogSnapshot,
                          on_bytes: Callable[[int], None], *,
                          keys: Sequence[ObjectInfo] | None) -> list[QueueCheck]:
    """The rest of each planned queue's check (its consume queue listed), after
    ``log`` was loaded (and ``keys``, if given, listed after it)."""
    async def rest(p: _Planned | QueueCheck) -> QueueCheck:
        if isinstance(p, QueueCheck):
            return p
        return await _verify(store, config, p, log, on_bytes, keys=keys)

    return await gather_bounded(QUEUE_CONCURRENCY, rest, plans)


async def _look_again(store: ObjectStore, config: TieredStoreConfig,
                      queues: Sequence[tuple[str, int]], on_bytes: Callable[[int], None]
                      ) -> list[QueueCheck]:
    """The queues checked on their own: their consume queues listed after one load
    of the log, the rest after another (as :func:`verify_queue` does, with two
    loads for all)."""
    log = await load_log(store, config)
    plans = await _plan_all(store, config, queues)
    await _list_consume_queues(store, config, plans, log, None)
    return await _verify_planned(store, config, plans, await load_log(store, config),
                                 on_bytes, keys=None)
