"""Read-only views of a message store's queues, for commands that must not write.

``AsyncMessageStore`` claims the queues it touches (fencing a live writer)
and finishes interrupted work; inspecting, verifying or tailing a store that
a broker is writing must do neither. These views read the queue metadata with
``QueueMetadata.open_read_only`` and find segments by listing
(:func:`recover_segment`, which only LISTs and GETs), and never write.

In write mode log the newest bytes of an open segment are pieces of the
broker's log objects: a view loads a :class:`LogSnapshot` (the log listed and
its indexes read) before it lists any segment, and open segments continue
with their pieces.

They see what is durable in the bucket. Past the consume queue's end, a
:class:`~tieredstore.store.read.queue_view.QueueView` reads the commit log's
records that a live writer has not dispatched yet, or a crashed one never
did (the durable tail, :mod:`tieredstore.store.read.tail`).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import tieredstore.metadata.metadata_pb2 as pb
from tieredstore.checksum import parse_crc
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ChunkMissing, InvalidName, TieredStoreError, is_damage
from tieredstore.log import LogIndexes, LogSnapshot, LogWriter
from tieredstore.metadata import (
    First,
    MetadataNotFound,
    QueueMetadata,
    QueuePath,
    list_queues,
    pb_type,
)
from tieredstore.names import validate_name
from tieredstore.objectstore import CRC_METADATA_KEY, ObjectInfo, ObjectStore
from tieredstore.segment import (
    ChunkRef,
    FileType,
    SegmentLayout,
    SegmentListing,
    SegmentPath,
    SegmentState,
    list_file,
)
from tieredstore.segment.layout import continue_with
from tieredstore.segment.path import EntryId
from tieredstore.segment.reader import ReadMode, SegmentReader, read_as
from tieredstore.segment.recovery import recover_segment
from tieredstore.store.base.errors import NoSuchQueue
from tieredstore.store.formats.keys import log_path, metadata_root, segment_path
from tieredstore.store.read.flatreader import FlatReader, SegmentRecords, first_live
from tieredstore.tasks import SingleFlight, gather_bounded

OPEN_CONCURRENCY = 16


@dataclass
class SegmentView:
    """One segment as the bucket holds it. ``state`` None: recovery found it corrupt."""

    path: SegmentPath
    state: SegmentState | None
    layout: SegmentLayout
    error: str = ""
    record: pb.SegmentRecord | None = None  # its record in the queue metadata, if any
    objects: list[ObjectInfo] = field(default_factory=list)  # filled by list_segments
    foreign: list[str] = field(default_factory=list)  # keys tieredstore did not write
    log: LogSnapshot | None = None  # the log pieces it was continued with: for a relist
    failure: TieredStoreError | None = None  # what recovery raised, if it did

    @property
    def base(self) -> int:
        return self.path.base_offset

    @property
    def size(self) -> int:
        if self.state is None and self.record is not None:
            return int(self.record.size)
        return self.layout.size

    @property
    def end(self) -> int:
        return self.base + self.size

    @property
    def stored_bytes(self) -> int:
        return sum(o.size for o in self.objects)

    @property
    def state_name(self) -> str:
        return "CORRUPT" if self.state is None else self.state.value


async def load_log(store: ObjectStore, config: TieredStoreConfig,
                   known: LogIndexes | None = None) -> LogSnapshot:
    """The broker's log as a view loads it (listed, its indexes read, those
    ``known`` holds from an earlier load excepted): load it before listing any
    segment."""
    return await LogSnapshot.load(store, log_path(config), known)


async def listed_queues(store: ObjectStore, config: TieredStoreConfig, *,
                        topics: Iterable[str] | None = None,
                        log: LogSnapshot | LogWriter | None = None) -> list[tuple[str, int]]:
    """Every queue whose metadata the bucket holds, sorted; with ``log``, the
    queues whose bytes are in its log objects too (those an open finds). With
    ``topics``, of the topics named only: only their heads are listed, and a
    name no queue can have (see :func:`validate_name`) selects nothing."""
    if topics is not None:
        topics = {t for t in topics if _valid_topic(t)}
    found = await list_queues(store, metadata_root(config), topics)
    if log is not None:
        found = sorted({*found, *(q for q in log.queues() if topics is None or q[0] in topics)})
    return found


def _valid_topic(topic: str) -> bool:
    try:
        validate_name("topic", topic)
    except InvalidName:
        return False
    return True


async def open_segment(store: ObjectStore, path: SegmentPath,
                       log: LogSnapshot | None = None, *,
                       listed: SegmentListing | None = None) -> SegmentView:
    """Recover a segment's layout by listing (read-only; ``listed``: from that
    listing, made after ``log`` was loaded), continued by the pieces ``log``
    holds for it; corrupt ones are reported."""
    try:
        recovered = await recover_segment(store, path, listed)
    except TieredStoreError as exc:
        return SegmentView(path, None, SegmentLayout(), error=str(exc), failure=exc)
    layout = recovered.layout
    pieces = log.of(path) if log else []
    sealed = recovered.state is not SegmentState.OPEN
    try:  # bytes gone before a piece: a hole, read around as the writer does
        continue_with(layout, pieces, sealed=sealed,
                      hole_key=lambda at: path.entry_key(EntryId(at)))
    except ValueError as exc:
        return SegmentView(path, None, SegmentLayout(), error=f"segment {path}: {exc}")
    return SegmentView(path, recovered.state, layout, foreign=recovered.foreign, log=log)


async def list_segments(store: ObjectStore, config: TieredStoreConfig, topic: str,
                        queue_id: int, file_type: FileType,
                        *, log: LogSnapshot | None = None,
                        keys: Sequence[ObjectInfo] | None = None) -> list[SegmentView]:
    """Every segment of one flat file that has objects, by base offset, trimmed
    ones (deletion still pending) included; open ones continued by their pieces
    in ``log`` (loaded before this call, and before ``keys``, a listing of the
    store to take the flat file's objects from), one that is only in the log too."""
    listings = await list_flat_file(store, config, topic, queue_id, file_type, keys=keys)
    bases = sorted({*listings, *(log.bases(topic, queue_id, file_type) if log else ())})

    async def one(base: int) -> SegmentView:
        listed = listings.get(base)
        view = await open_segment(store, segment_path(config, topic, queue_id, file_type, base),
                                  log, listed=listed)
        view.objects = listed.objects if listed is not None else []
        return view

    return await gather_bounded(OPEN_CONCURRENCY, one, bases)


@dataclass
class ListedFile:
    """One flat file's segments as listed (trimmed ones too), each with its
    record if the metadata has one; its live records; its first live position."""

    views: list[SegmentView]
    records: list[pb.SegmentRecord]
    first: int


async def list_recorded(store: ObjectStore, config: TieredStoreConfig, meta: QueueMetadata,
                        file_type: FileType, *, log: LogSnapshot | None = None,
                        keys: Sequence[ObjectInfo] | None = None) -> ListedFile:
    """:func:`list_segments` of one flat file of ``meta``'s queue, then its live
    records in ``meta``, each attached to the segment it names (if listed)."""
    views = await list_segments(store, config, meta.queue.topic, meta.queue.queue_id,
                                file_type, log=log, keys=keys)
    by_base = {v.base: v for v in views}
    records = [r async for r in meta.records(file_type)]
    for record in records:
        if record.base_offset in by_base:
            by_base[record.base_offset].record = record
    return ListedFile(views, records, first_live(meta, file_type))


async def list_flat_file(store: ObjectStore, config: TieredStoreConfig, topic: str,
                         queue_id: int, file_type: FileType, *,
                         keys: Sequence[ObjectInfo] | None = None
                         ) -> dict[int, SegmentListing]:
    """Each segment of one flat file by base, from one paged LIST (no GET; none
    with ``keys``, a listing of the store made already)."""
    return await list_file(store, segment_path(config, topic, queue_id, file_type), keys=keys)


async def sealing_segments(store: ObjectStore, config: TieredStoreConfig, topic: str,
                           queue_id: int) -> int:
    """Sealed segments not merged yet, of the queue's commit log, consume queue and
    key index, from their object names alone (:func:`list_flat_file`)."""
    return sum([s.state is SegmentState.SEALING for t in FileType
                for s in (await list_flat_file(store, config, topic, queue_id, t)).values()])


async def unit_crc(store: ObjectStore, unit: ChunkRef) -> int | None:
    """A unit's CRC32C as stored: in the layout, or for a listed chunk in its
    object's metadata (one HEAD); None if it has none."""
    if unit.crc32c is not None:
        return unit.crc32c
    text = (await store.head(unit.key)).metadata.get(CRC_METADATA_KEY)
    return parse_crc(text) if text else None


async def open_metadata(store: ObjectStore, config: TieredStoreConfig, topic: str,
                        queue_id: int, *, log: LogSnapshot | None = None) -> QueueMetadata:
    """The queue's metadata, read-only (:class:`NoSuchQueue` if it has no head). A
    queue with no head whose bytes ``log`` holds has empty metadata, as a
    writer's open takes it (docs/log-objects.md, Recovery): its segments are then
    all past the records."""
    path = QueuePath(metadata_root(config), topic, queue_id)
    try:
        return await QueueMetadata.open_read_only(store, path)
    except MetadataNotFound:
        if log is not None and (topic, queue_id) in log.queues():
            return QueueMetadata.empty(store, path)
        raise NoSuchQueue(topic, queue_id) from None


async def recorded_segments(store: ObjectStore, config: TieredStoreConfig, topic: str,
                            queue_id: int) -> int:
    """How many segment records the queue's metadata holds, of every flat file."""
    meta = await open_metadata(store, config, topic, queue_id)
    return sum([len([r async for r in meta.records(t)]) for t in meta.file_types])


class PlannedSegments:
    """The segments of one flat file a plan took from the metadata, as
    ``(base, size)`` in order; the last is ``(base, None)`` when it was the
    active segment (its end is found by listing)."""

    def __init__(self, segments: Sequence[tuple[int, int | None]]) -> None:
        self._sealed = [(base, size) for base, size in segments if size is not None]
        self._bases = [base for base, _ in self._sealed]
        active = [base for base, size in segments if size is None]
        if active:
            self._next = active[0]
        elif self._sealed:
            self._next = self._sealed[-1][0] + self._sealed[-1][1]
        else:
            self._next = 0

    def next_base_offset(self, file_type: FileType) -> int:
        return self._next

    def first(self, file_type: FileType) -> First:
        return First(self._bases[0] if self._bases else self._next, 0)

    async def find_by_base_offset(self, file_type: FileType, position: int
                                  ) -> pb.SegmentRecord | None:
        i = bisect.bisect_right(self._bases, position) - 1
        if i < 0 or position >= self._bases[i] + self._sealed[i][1]:
            return None
        base, size = self._sealed[i]
        return pb.SegmentRecord(file_type=pb_type(file_type), base_offset=base, size=size)


RELISTS = 2  # a merge in flight: the chunks, then possibly the chunks again


class FlatView(FlatReader[SegmentView]):
    """One queue's flat file of one type, read-only.

    Sealed segments are found through their records (the queue metadata, or a
    read plan); the segments from ``next_base`` on (the active one, and one
    sealed but not yet recorded if a writer stopped between the two) by
    listing, when first needed. A segment that cannot be read is a view with
    no state (``segment_at`` returns it, a read raises its error). ``listed``: the
    segments as a caller already listed them (with ``log``), not listed again.
    Readers of one view that come together share each listing and each open
    of a segment (:class:`~tieredstore.tasks.SingleFlight`); a listing again
    (the tail past what was seen, chunks a merge replaced) is one begun after
    they asked.
    """

    def __init__(self, store: ObjectStore, config: TieredStoreConfig, records: SegmentRecords,
                 *, topic: str, queue_id: int, file_type: FileType,
                 reader: SegmentReader, log: LogSnapshot | None = None,
                 listed: Iterable[SegmentView] = ()) -> None:
        self.store = store
        self.config = config
        self.records = records
        self.topic = topic
        self.queue_id = queue_id
        self.file_type = file_type
        self.reader = reader
        self.log = log
        self.tail: list[SegmentView] = []
        self._sealed: dict[int, SegmentView] = {}
        self._listed = {v.base: v for v in listed}
        self._next_base = records.next_base_offset(self.file_type)
        self._relisted = False  # the tail listed again after a fresh load of the log
        # Listings and opens under way: "tail", "reload", "relist {id}", a record's base.
        self._flights: SingleFlight[str | int, object] = SingleFlight()

    @property
    def next_base(self) -> int:
        return self._next_base

    async def open(self) -> None:
        """List the segments from ``next_base`` on (once)."""
        if not self.tail:
            await self._flights.run("tail", self._list_tail)

    async def _list_tail(self) -> None:
        tail: list[SegmentView] = []
        base = self.next_base
        while True:
            view = self._listed.get(base) or await open_segment(self.store, self.path_of(base),
                                                                self.log)
            tail.append(view)
            if view.state is not SegmentState.OPEN and view.state is not None and view.size:
                base = view.end  # sealed, not yet recorded: a writer stopped in between
                continue
            break
        self.tail = tail

    @property
    def end(self) -> int:
        return self.tail[-1].end

    async def _tail(self, reach: int) -> list[tuple[SegmentView, int]]:
        await self.open()
        if reach > self.end and self.log is not None and (not self._relisted
                                                          or "reload" in self._flights):
            # The bytes a unit listed after the log's load points to may be in a
            # newer log object (docs/log-objects.md, "Reading the log").
            self._relisted = True
            await self._flights.run("reload", self._reload_tail)
        return [(view, view.end) for view in self.tail]

    async def _reload_tail(self) -> None:
        assert self.log is not None
        self.log = await self.log.reload()
        self._listed = {}
        await self._list_tail()

    async def _recorded(self, record: pb.SegmentRecord) -> SegmentView:
        sealed = self._sealed.get(record.base_offset)
        if sealed is not None:
            return sealed

        async def open_recorded() -> SegmentView:
            listed = self._listed.get(record.base_offset)
            sealed = dataclasses.replace(listed) if listed is not None else \
                await open_segment(self.store, self.path_of(record.base_offset))
            sealed.record = record
            problem = None if sealed.state is None else self._size_problem(sealed, record)
            if problem is not None:
                sealed.state, sealed.error = None, problem
            if sealed.failure is None or is_damage(sealed.failure):  # an outage: not kept
                self._sealed[record.base_offset] = sealed
            return sealed

        opened = await self._flights.run(record.base_offset, open_recorded)
        assert isinstance(opened, SegmentView)
        return opened

    def problem(self, segment: SegmentView) -> str | None:
        return segment.error if segment.state is None else None

    def failure(self, segment: SegmentView) -> TieredStoreError | None:
        return segment.failure if segment.state is None else None

    def is_open(self, segment: SegmentView) -> bool:
        return segment.state is SegmentState.OPEN

    async def _read(self, segment: SegmentView, local: int, length: int, mode: ReadMode
                    ) -> bytes | memoryview:
        """A read that finds chunks gone lists them again."""
        for relists in range(RELISTS + 1):
            try:
                return await read_as(self.reader, segment.path, segment.layout, local, length,
                                     mode=mode)
            except ChunkMissing:
                # A live writer's merge replaced the chunks since they were listed
                # (listed again while the merge deleted them: once more).
                if relists == RELISTS:
                    raise
                await self._flights.run(f"relist {id(segment)}",
                                        lambda: self._relist(segment), fresh=True)
        raise AssertionError("unreachable")

    async def _relist(self, view: SegmentView) -> None:
        log = await view.log.reload() if view.log is not None else None
        fresh = await open_segment(self.store, view.path, log)
        if fresh.state is None or fresh.size < view.size:
            raise self._corrupt(fresh.error or f"segment {view.path} shrank to {fresh.size} "
                                "bytes while it was read")
        view.state, view.layout = fresh.state, fresh.layout
