"""Compact: merge sealed segments whose merge never ran or never finished.

A writer with ``merge_on_seal = false``, or one that stopped mid-merge, leaves
sealed segments as many chunk objects (more GETs to read, more keys to list).
The driver finds them from metadata and one listing per file of each queue:
a segment its queue's metadata records as sealed whose prefix still holds
chunks or a ``sealed`` marker. Each is merged by one Spark task that opens it
with ``ChunkedSegment.open``, which resumes the seal: the multipart merge,
then deleting the chunks and the marker.

Never touched: a queue's active segment (the one after its last record, and
anything later), segments no live record names (trimmed, or foreign), and a
recorded segment without a seal marker (reported: the writer must seal it).
Run it against a store whose writer does not merge the same segments at the
same moment; if one does, the later merge finds the same object in place and
succeeds, but the writer's cached chunk layout of that segment goes stale.
"""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.metadata import MetadataNotFound, QueueMetadata, QueuePath
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions
from tieredstore.spark.options import ConfigValues, config_of
from tieredstore.spark.plan import find_queues
from tieredstore.spark.selection import Selection
from tieredstore.store import list_flat_file, open_object_store
from tieredstore.store.keys import metadata_root, segment_path


@dataclass(frozen=True, slots=True)
class CompactTarget:
    """A sealed segment left unmerged (plain values: pickled to a task)."""

    topic: str
    queue_id: int
    file_type: str  # SegmentFileType value: commitlog, consumequeue, index
    base_offset: int
    chunks: int
    state: str  # "sealing": marker and chunks; "leftovers": merged, chunks not deleted


@dataclass(frozen=True, slots=True)
class CompactResult:
    """What a task did to one segment (a row of the compact table)."""

    topic: str
    queue_id: int
    file_type: str
    base_offset: int
    state: str
    chunks: int
    merged: bool
    parts: int
    bytes_copied: int
    bytes_reuploaded: int
    error: str | None


@dataclass(slots=True)
class Survey:
    """What the driver found: work, and what it leaves alone on purpose."""

    targets: list[CompactTarget]
    skipped: list[str]


async def survey(store: ObjectStore, config: TieredStoreConfig, selection: Selection
                 ) -> Survey:
    """Find sealed segments left unmerged in the selected queues."""
    root = metadata_root(config)
    out = Survey([], [])
    for topic, queue_id in await find_queues(store, root, selection):
        try:
            meta = await QueueMetadata.open_read_only(store, QueuePath(root, topic, queue_id))
        except MetadataNotFound:
            continue
        for file_type in meta.file_types:
            await _survey_file(store, config, meta, file_type, out)
    return out


async def _survey_file(store: ObjectStore, config: TieredStoreConfig, meta: QueueMetadata,
                       file_type: FileType, out: Survey) -> None:
    topic, queue_id = meta.queue.topic, meta.queue.queue_id
    live = {r.base_offset async for r in meta.records(file_type)}
    active = meta.next_base_offset(file_type)
    where = f"{topic}/{queue_id} {file_type.label}"
    for base, listed in (await list_flat_file(store, config, topic, queue_id, file_type)).items():
        chunks = len(listed.data_chunks)  # zero-byte fence and seal entries stay
        marker, merged = listed.marker is not None, listed.merged is not None
        if base >= active or not (chunks or marker):
            continue  # the active segment (or later), or merged and clean
        if base not in live:
            out.skipped.append(f"{where} @{base}: no live metadata record names it "
                               "(trimmed?): left alone")
        elif not marker and not merged:
            out.skipped.append(f"{where} @{base}: recorded as sealed but has no seal "
                               "marker: left for the writer")
        else:
            out.targets.append(CompactTarget(topic, queue_id, file_type.label, base, chunks,
                                             "leftovers" if merged else "sealing"))


def compact_segment(config: ConfigValues, target: CompactTarget) -> CompactResult:
    """Merge one segment (runs in a task, on a loop and store of its own)."""
    settings = config_of(config)

    async def run() -> CompactResult:
        store = open_object_store(settings)
        try:
            path = segment_path(settings, target.topic, target.queue_id,
                                FileType.from_label(target.file_type), target.base_offset)
            segment = await ChunkedSegment.open(
                store, path, options=SegmentOptions(chunk_size=settings.chunk_size))
            stats = segment.last_merge
            return _result(target, merged=segment.merged,
                           parts=stats.parts if stats else 0,
                           copied=stats.bytes_copied if stats else 0,
                           uploaded=stats.bytes_reuploaded if stats else 0,
                           error=None if segment.merged else "still not merged")
        finally:
            await store.close()

    try:
        return sync.run(run())
    except (TieredStoreError, OSError) as exc:
        return _result(target, merged=False, error=f"{type(exc).__name__}: {exc}")


def _result(target: CompactTarget, *, merged: bool, parts: int = 0, copied: int = 0,
            uploaded: int = 0, error: str | None) -> CompactResult:
    return CompactResult(target.topic, target.queue_id, target.file_type, target.base_offset,
                         target.state, target.chunks, merged, parts, copied, uploaded, error)
