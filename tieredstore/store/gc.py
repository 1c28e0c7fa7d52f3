"""Garbage collection: what no metadata references, older than a safety age.

A pass looks at each queue's files (commit log, consume queue, key index: one
paged LIST per file type and one LIST of multipart uploads) against its
metadata, read-only, and finds:

- **trimmed segments**: every segment below the file's first live record
  (retention moved the first pointer, then a crash stopped its deletes);
- **chunks beside a merged object**: data chunks, and the sealed marker, of
  a segment whose ``segment`` object stands (a cleanup that did not finish);
  zero-byte fence entries stay (see docs/format.md);
- **multipart uploads** begun before the safety age (a merge whose writer
  died; a live merge finishes in far less);
- **temporary files** the backend keeps (a local directory's ``tmp/``).

It never deletes what a live writer may still reference: the first pointer
only moves forward, so nothing below it is referenced again; a merged
object replaces its chunks for every reader (one that listed the chunks
lists again when one is gone); and everything younger than the safety age
is left alone, which covers an upload in flight, a segment a concurrent
retention pass is deleting, and a temporary file being written. Nothing at
or after the first live record is deleted but the leftovers named above.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tieredstore.config import TieredStoreConfig
from tieredstore.metadata import QueueMetadata
from tieredstore.objectstore.base import ObjectInfo, ObjectStore
from tieredstore.segment import FileType, destroy_segment
from tieredstore.segment.path import (
    MERGED_NAME,
    SEALED_NAME,
    SegmentPath,
    parse_chunk_name,
    parse_segment_dir,
)
from tieredstore.store.keys import segment_path
from tieredstore.store.view import listed_queues, open_metadata

log = logging.getLogger(__name__)

TRIMMED = "trimmed segment"
BESIDE_MERGED = "chunk beside a merged object"
UPLOAD = "multipart upload"
TEMPORARY = "temporary file"


@dataclass(frozen=True, slots=True)
class Garbage:
    """One thing a pass deletes: its kind, its key (a segment's directory for a
    trimmed segment, ``key#upload-id`` for an upload), and why."""

    kind: str
    key: str
    detail: str
    segment: SegmentPath | None = None  # a trimmed segment's path


@dataclass
class GcReport:
    found: list[Garbage] = field(default_factory=list)
    deleted: int = 0
    dry_run: bool = False

    def by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for item in self.found:
            counts[item.kind] += 1
        return dict(counts)


def _old(info: ObjectInfo, cutoff: datetime) -> bool:
    return info.modified is not None and info.modified < cutoff


async def find_garbage(store: ObjectStore, config: TieredStoreConfig,
                       queues: Iterable[QueueMetadata], *, safety_age: float,
                       now: datetime | None = None) -> list[Garbage]:
    """Everything a pass would delete, without deleting it."""
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=safety_age)
    found: list[Garbage] = []
    for meta in queues:
        topic, queue_id = meta.queue.topic, meta.queue.queue_id
        for file_type in (FileType.CONSUME_QUEUE, FileType.COMMIT_LOG, FileType.INDEX):
            first = meta.first(file_type).base_offset
            path = segment_path(config, topic, queue_id, file_type)
            prefix = path.file_prefix
            found += _segments(path, first, await store.list_all(prefix), cutoff)
            for upload in await store.list_multipart_uploads(prefix):
                if upload.initiated is not None and upload.initiated < cutoff:
                    found.append(Garbage(UPLOAD, f"{upload.key}#{upload.upload_id}",
                                         f"begun {upload.initiated:%Y-%m-%d %H:%M:%S}Z"))
    for name in await store.stale_temporary_files(cutoff):
        found.append(Garbage(TEMPORARY, name, "left by a writer that was killed"))
    return found


def _segments(path: SegmentPath, first: int, objects: Sequence[ObjectInfo],
              cutoff: datetime) -> list[Garbage]:
    prefix = path.file_prefix
    groups: dict[int, list[ObjectInfo]] = defaultdict(list)
    for info in objects:
        directory, _, _name = info.key[len(prefix):].partition("/")
        base = parse_segment_dir(directory)
        if base is not None:
            groups[base].append(info)
    out: list[Garbage] = []
    for base, infos in sorted(groups.items()):
        segment = path.with_base_offset(base)
        directory = segment.base_dir
        if base < first:
            if all(_old(i, cutoff) for i in infos):
                out.append(Garbage(TRIMMED, directory,
                                   f"{len(infos)} object(s) below the first live segment "
                                   f"at {first}", segment))
            continue
        names = {i.key[len(directory):]: i for i in infos}
        if MERGED_NAME not in names:
            continue
        for name, info in sorted(names.items()):
            stale = name == SEALED_NAME or (parse_chunk_name(name) is not None and info.size)
            if stale and _old(info, cutoff):
                out.append(Garbage(BESIDE_MERGED, info.key, f"{info.size} bytes"))
    return out


async def delete_garbage(store: ObjectStore, found: Sequence[Garbage]) -> int:
    """Delete what :func:`find_garbage` found; returns how many items went."""
    deleted = 0
    beside = [g.key for g in found if g.kind == BESIDE_MERGED]
    markers = [k for k in beside if k.endswith("/" + SEALED_NAME)]
    await store.delete_many([k for k in beside if k not in markers])
    await store.delete_many(markers)  # the marker last, as a merge's cleanup does
    deleted += len(beside)
    for item in found:
        if item.segment is not None:
            await destroy_segment(store, item.segment)
        elif item.kind == UPLOAD:
            key, _, upload_id = item.key.rpartition("#")
            await store.abort_multipart(key, upload_id)
        else:
            continue
        deleted += 1
    temporary = [g.key for g in found if g.kind == TEMPORARY]
    await store.delete_temporary_files(temporary)
    return deleted + len(temporary)


async def collect_garbage(store: ObjectStore, config: TieredStoreConfig,
                          queues: Iterable[QueueMetadata] | None = None, *,
                          safety_age: float, dry_run: bool = False,
                          now: datetime | None = None) -> GcReport:
    """Find what no metadata references and is older than ``safety_age`` seconds,
    and (unless ``dry_run``) delete it. ``queues``: the metadata of the queues to
    look at; if None, every queue whose metadata the bucket holds, read-only
    (never claiming one: safe beside a live writer)."""
    if queues is None:
        queues = [await open_metadata(store, config, topic, queue_id)
                  for topic, queue_id in await listed_queues(store, config)]
    found = await find_garbage(store, config, queues, safety_age=safety_age, now=now)
    report = GcReport(found, dry_run=dry_run)
    if not dry_run and found:
        report.deleted = await delete_garbage(store, found)
        log.info("garbage collection deleted %d item(s): %s", report.deleted, report.by_kind())
    return report
