"""Garbage collection: what nothing needs, older than a safety age.

A pass reads the queue metadata read-only, lists each queue's files (one
paged LIST and one LIST of uploads per file type) and each broker's log (its
indexes, then the segments its old objects hold pieces of), and finds
(docs/gc.md, *Garbage collection*):

- **trimmed segments** of the queues looked at: every segment below its
  file's first live record (retention moved the first pointer, then a crash
  stopped its deletes);
- **chunks beside a merged object**: data chunks, and the sealed marker, of
  a segment whose ``segment`` object stands (a cleanup that did not finish);
  zero-byte fence entries stay;
- **multipart uploads** begun before the safety age (a merge whose writer
  died; a live merge finishes in far less);
- **log objects with nothing live**, of every broker of the cluster with
  metadata, running or not: a data entry none of whose pieces a reader would take (each lies in
  its segment's chunks, merged object or a longer piece, or below its file's
  first live record), and **log fences**; never the newest entry of a log;
- **temporary files** the backend keeps (a local directory's ``tmp/``);
- whatever the ``finders`` passed in find (the offload attempts no managed
  ledger records: :func:`tieredstore.ledger.offload_garbage`).

It never deletes what a live writer may still need: the first pointer only
moves forward, so nothing below it is referenced again; a merged object
replaces its chunks for every reader (one that listed the chunks lists again
when one is gone); a piece a reader would take keeps its log object; and
everything younger than the safety age is left alone, which covers an upload
in flight, a segment a concurrent retention pass is deleting, a compaction or
consolidation in flight (a segment with a young object or piece keeps every
piece), an idle writer's next log id (docs/log-objects.md, *Deletion*), and a
temporary file being written.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import CorruptSegment, TieredStoreError
from tieredstore.log import LogPath, LogSnapshot
from tieredstore.metadata import QueueMetadata, QueuePath
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment import (
    ChunkRef,
    FileType,
    SegmentListing,
    SegmentPath,
    SegmentState,
    list_file,
    list_segment,
)
from tieredstore.segment.garbage import (
    BESIDE_MERGED,
    DEAD_LOG,
    LOG_FENCE,
    TEMPORARY,
    TRIMMED,
    UPLOAD,
    Garbage,
    GcReport,
    beside_merged,
    collect,
    stale_uploads,
)
from tieredstore.segment.layout import continue_with
from tieredstore.segment.listing import before
from tieredstore.segment.recovery import chunk_series
from tieredstore.store.formats.keys import metadata_root, segment_path
from tieredstore.store.ops.brokers import list_brokers, root_broker
from tieredstore.store.read.view import listed_queues, open_metadata

__all__ = ["BESIDE_MERGED", "DEAD_LOG", "LOG_FENCE", "TEMPORARY", "TRIMMED", "UPLOAD",
           "Finder", "Garbage", "GcReport", "collect_garbage", "find_garbage"]

log = logging.getLogger(__name__)

Finder = Callable[[datetime], Awaitable[list[Garbage]]]
"""Finds more garbage, older than the cutoff it is given (the ledger's offloads)."""


async def find_garbage(store: ObjectStore, config: TieredStoreConfig,
                       queues: Iterable[QueueMetadata], *, cutoff: datetime,
                       finders: Sequence[Finder] = (),
                       brokers: Sequence[str] | None = None) -> list[Garbage]:
    """Everything a pass would delete, without deleting it: of ``queues`` (of any
    broker of ``config``'s cluster), and of the logs of ``brokers`` (None: of
    every broker of the cluster); each item names its broker."""
    metas = {(root_broker(config, m.queue.root), m.queue.topic, m.queue.queue_id): m
             for m in queues}
    found: list[Garbage] = []
    for (broker, topic, queue_id), meta in sorted(metas.items()):
        for file_type in FileType:
            first = meta.first(file_type).base_offset
            path = segment_path(config.replace(broker=broker), topic, queue_id, file_type)
            for listing in (await list_file(store, path, uploads=True)).values():
                found += [replace(g, broker=broker)
                          for g in _segment_garbage(listing, first, cutoff)]
    firsts = _Firsts(store, config, metas)
    for log_path in await _logs(store, config, brokers):
        found += [replace(g, broker=log_path.broker)
                  for g in await _log_garbage(store, log_path, firsts, cutoff)]
    if store.temporary_files is not None:
        found += [Garbage(TEMPORARY, name, "left by a writer that was killed", temporary=True)
                  for name in await store.temporary_files.stale(cutoff)]
    for finder in finders:
        found += await finder(cutoff)
    return found


def _segment_garbage(listing: SegmentListing, first: int, cutoff: datetime) -> list[Garbage]:
    path = listing.path
    if path.base_offset < first:
        if not listing.older_than(cutoff):
            return []
        return [Garbage(TRIMMED, path.base_dir, f"{len(listing.objects)} object(s) below the "
                        f"first live segment at {first}", segment=path)]
    return beside_merged(listing, cutoff) + stale_uploads(listing.uploads, cutoff)


async def _logs(store: ObjectStore, config: TieredStoreConfig,
                brokers: Sequence[str] | None) -> list[LogPath]:
    """The log of each of ``brokers``; None: of every broker of the cluster that
    has metadata (every store that opened registers under its broker's
    metadata root), running or not."""
    named = {config.broker, *await list_brokers(store, config)} if brokers is None else {
        *brokers}
    return [LogPath(config.cluster, broker, config.key_prefix) for broker in sorted(named)]


async def _log_garbage(store: ObjectStore, path: LogPath, firsts: _Firsts,
                       cutoff: datetime) -> list[Garbage]:
    """The log's entries, but the newest, that nothing needs."""
    entries = sorted((e for e in await store.list_all(path.directory)
                      if path.parse(e.key) is not None), key=lambda e: e.key)
    old = {e.key: e for e in entries[:-1] if before(e.modified, cutoff)}  # never the newest
    if not old:
        return []
    try:
        live = await _live_log_objects(store, path, firsts, cutoff, set(old))
    except TieredStoreError as exc:
        log.warning("garbage collection leaves %s alone: %s", path.directory, exc)
        return []
    found: list[Garbage] = []
    for key, entry in old.items():
        if not entry.size:
            found.append(Garbage(LOG_FENCE, key, "a newer entry stands", keys=(key,)))
        elif key not in live:
            found.append(Garbage(DEAD_LOG, key, f"{entry.size} bytes", keys=(key,)))
    return found


class _Firsts:
    """Each queue's first live base offset per file type, read-only (0 when its
    metadata cannot be read: then nothing is taken as trimmed)."""

    def __init__(self, store: ObjectStore, config: TieredStoreConfig,
                 metas: dict[tuple[str, str, int], QueueMetadata]) -> None:
        self.store, self.config = store, config
        self.metas: dict[tuple[str, str, int], QueueMetadata | None] = dict(metas)

    async def first(self, path: SegmentPath) -> int:
        key = (path.broker, path.topic, path.queue_id)
        if key not in self.metas:
            root = metadata_root(self.config.replace(broker=path.broker))
            try:
                self.metas[key] = await QueueMetadata.open_read_only(
                    self.store, QueuePath(root, path.topic, path.queue_id))
            except TieredStoreError:
                self.metas[key] = None
        meta = self.metas[key]
        return 0 if meta is None else meta.first(path.file_type).base_offset


async def _live_log_objects(store: ObjectStore, path: LogPath, firsts: _Firsts,
                            cutoff: datetime, old: set[str]) -> set[str]:
    """The keys of ``path``'s log objects holding a piece a reader would take.
    As a reader does, the log is loaded before its segments are listed: a
    piece compacted in between lies in a chunk the listing shows."""
    snapshot = await LogSnapshot.load(store, path)
    live: set[str] = set()
    for topic, queue_id in sorted(snapshot.queues()):
        pieces: dict[tuple[FileType, int], list[ChunkRef]] = {}
        for file_type, base, unit in snapshot.of_queue(topic, queue_id):
            pieces.setdefault((file_type, base), []).append(unit)
        for (file_type, base), units in pieces.items():
            seg = SegmentPath(path.cluster, path.broker, topic, queue_id, file_type, base,
                              path.prefix)
            keys = {u.key for u in units}
            if base < await firsts.first(seg):
                continue  # trimmed: nothing reads it again
            if not keys <= old:
                live |= keys  # a piece in a young object: in flight
            else:
                live |= _taken(await list_segment(store, seg), units, cutoff)
    return live


def _taken(listing: SegmentListing, units: list[ChunkRef], cutoff: datetime) -> set[str]:
    """The log objects holding a piece a reader of the segment would take, as
    the view continues its chunks (:func:`continue_with`); every one while the
    segment has an object younger than the cutoff, or is damaged."""
    keys = {u.key for u in units}
    if not listing.older_than(cutoff):
        return keys
    if listing.merged is not None:
        return set()  # a seal takes every piece into chunks first
    try:
        layout = chunk_series(listing.path, listing.chunks).layout
        rest = continue_with(layout, units, sealed=listing.state is not SegmentState.OPEN)
    except (CorruptSegment, ValueError):
        return keys
    left = {id(u) for u in rest}
    return {u.key for u in units if id(u) not in left}


async def collect_garbage(store: ObjectStore, config: TieredStoreConfig,
                          queues: Iterable[QueueMetadata] | None = None, *,
                          safety_age: float, dry_run: bool = False,
                          now: datetime | None = None,
                          finders: Sequence[Finder] = (),
                          brokers: Sequence[str] | None = None) -> GcReport:
    """Find what nothing needs and is older than ``safety_age`` seconds, and
    (unless ``dry_run``) delete it. ``queues``: the metadata of the queues to
    look at; if None, every queue whose metadata the bucket holds of each of
    ``brokers`` (None: ``config.broker``), read-only (never claiming one: safe
    beside a live writer). The logs looked at: those of ``brokers`` (None:
    every broker of the cluster's)."""
    if queues is None:
        queues = []
        for broker in [config.broker] if brokers is None else brokers:
            of = config.replace(broker=broker)
            queues += [await open_metadata(store, of, topic, queue_id)
                       for topic, queue_id in await listed_queues(store, of)]
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=safety_age)
    found = await find_garbage(store, config, queues, cutoff=cutoff, finders=finders,
                               brokers=brokers)
    return await collect(store, found, dry_run=dry_run)
