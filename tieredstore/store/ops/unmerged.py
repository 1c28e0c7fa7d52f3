"""Sealed segments left unmerged, and merging one of them from outside the writer.

A writer with ``merge_on_seal = false``, or one that stopped mid-merge, leaves
sealed segments as many chunk objects. :func:`unmerged_segments` finds them
from the queue's metadata and one listing per file: a segment its metadata
records as sealed whose prefix still holds data chunks or a ``sealed``
marker. :func:`merge_segment` opens one with ``ChunkedSegment.open``, which
resumes the seal: the multipart merge, then deleting the chunks and the marker.

Never touched: a queue's active segment (the one after its last record, and
anything later), segments no live record names (trimmed, or foreign), and a
recorded segment without a seal marker (reported: the writer must seal it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tieredstore.config import TieredStoreConfig
from tieredstore.filetype import FileType
from tieredstore.metadata import MetadataNotFound, QueueMetadata, QueuePath
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import ChunkedSegment, SegmentOptions
from tieredstore.segment.merge import MergeStats
from tieredstore.store.formats.keys import metadata_root, segment_path
from tieredstore.store.read.view import list_flat_file


@dataclass(frozen=True, slots=True)
class Unmerged:
    """A sealed segment left unmerged (plain values: they travel to Spark tasks)."""

    topic: str
    queue_id: int
    file_type: str  # FileType label: commitlog, consumequeue, index
    base_offset: int
    chunks: int
    state: str  # "sealing": marker and chunks; "leftovers": merged, chunks not deleted


@dataclass(slots=True)
class UnmergedSurvey:
    """What a look found: segments to merge, and what it leaves alone on purpose."""

    targets: list[Unmerged] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


async def unmerged_segments(store: ObjectStore, config: TieredStoreConfig, topic: str,
                            queue_id: int, out: UnmergedSurvey) -> None:
    """Add the queue's sealed segments left unmerged to ``out`` (none if it has no head)."""
    try:
        meta = await QueueMetadata.open_read_only(
            store, QueuePath(metadata_root(config), topic, queue_id))
    except MetadataNotFound:
        return
    for file_type in meta.file_types:
        live = {r.base_offset async for r in meta.records(file_type)}
        active = meta.next_base_offset(file_type)
        where = f"{topic}/{queue_id} {file_type.label}"
        for base, listed in (await list_flat_file(store, config, topic, queue_id,
                                                  file_type)).items():
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
                out.targets.append(Unmerged(topic, queue_id, file_type.label, base, chunks,
                                            "leftovers" if merged else "sealing"))


async def merge_segment(store: ObjectStore, config: TieredStoreConfig, target: Unmerged
                        ) -> tuple[bool, MergeStats | None]:
    """Open ``target`` (which resumes its seal and merge): whether it is merged now,
    and what its merge cost (None if this open merged nothing)."""
    path = segment_path(config, target.topic, target.queue_id,
                        FileType.from_label(target.file_type), target.base_offset)
    segment = await ChunkedSegment.open(store, path,
                                        options=SegmentOptions(
                                            chunk_size=config.for_topic(target.topic).chunk_size))
    return segment.merged, segment.last_merge
