"""Segments: keys, layouts, chunked segments with merge on seal, recovery."""

from tieredstore.filetype import FileType
from tieredstore.segment.base import FileSegment
from tieredstore.segment.chunked import ChunkedSegment
from tieredstore.segment.cleanup import destroy_segment
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.segment.merge import MergeStats
from tieredstore.segment.options import SegmentOptions
from tieredstore.segment.path import SegmentPath, validate_name
from tieredstore.segment.planner import PartKind, PlannedPart, plan_merge
from tieredstore.segment.reader import DirectReader, SegmentReader, fetch_unit
from tieredstore.segment.recovery import SegmentState, recover_segment

__all__ = [
    "ChunkRef",
    "ChunkedSegment",
    "DirectReader",
    "FileSegment",
    "FileType",
    "MergeStats",
    "PartKind",
    "PlannedPart",
    "SegmentLayout",
    "SegmentOptions",
    "SegmentPath",
    "SegmentReader",
    "SegmentState",
    "destroy_segment",
    "fetch_unit",
    "plan_merge",
    "recover_segment",
    "validate_name",
]
