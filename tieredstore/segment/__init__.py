"""Segments: keys, the one listing of their directories, layouts, chunked segments
with merge on seal, recovery."""

from tieredstore.filetype import FileType
from tieredstore.segment.base import FileSegment
from tieredstore.segment.chunked import ChunkedSegment
from tieredstore.segment.garbage import destroy_segment
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.segment.listing import (
    SegmentListing,
    SegmentState,
    group_segments,
    list_file,
    list_segment,
)
from tieredstore.segment.merge import MergeStats
from tieredstore.segment.options import SegmentOptions
from tieredstore.segment.path import SegmentPath
from tieredstore.segment.reader import DirectReader, SegmentReader
from tieredstore.segment.recovery import recover_segment

__all__ = [
    "ChunkRef",
    "ChunkedSegment",
    "DirectReader",
    "FileSegment",
    "FileType",
    "MergeStats",
    "SegmentLayout",
    "SegmentListing",
    "SegmentOptions",
    "SegmentPath",
    "SegmentReader",
    "SegmentState",
    "destroy_segment",
    "group_segments",
    "list_file",
    "list_segment",
    "recover_segment",
]
