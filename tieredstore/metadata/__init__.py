"""Per-queue metadata in the object store: a small mutable head, immutable pages.

See :mod:`tieredstore.metadata.queue` for the design (seed 001) and
:mod:`tieredstore.metadata.keys` for the key layout. ``metadata.proto`` holds
the schemas; ``make proto`` regenerates ``metadata_pb2``.
"""

from tieredstore.filetype import FileType
from tieredstore.metadata.catalog import list_queues
from tieredstore.metadata.errors import (
    CorruptMetadata,
    MetadataError,
    MetadataFenced,
    MetadataNotFound,
    MetadataReadOnly,
    MetadataTooLarge,
    PageMissing,
    RecordOrderError,
)
from tieredstore.metadata.keys import PageRef, QueuePath, pb_type
from tieredstore.metadata.metadata_pb2 import QueueHead, SegmentRecord
from tieredstore.metadata.queue import DEFAULT_PAGE_SIZE, QueueMetadata
from tieredstore.metadata.state import First

COMMIT_LOG = FileType.COMMIT_LOG
CONSUME_QUEUE = FileType.CONSUME_QUEUE
INDEX = FileType.INDEX

__all__ = [
    "COMMIT_LOG",
    "CONSUME_QUEUE",
    "DEFAULT_PAGE_SIZE",
    "INDEX",
    "CorruptMetadata",
    "FileType",
    "First",
    "MetadataError",
    "MetadataFenced",
    "MetadataNotFound",
    "MetadataReadOnly",
    "MetadataTooLarge",
    "PageMissing",
    "PageRef",
    "QueueHead",
    "QueueMetadata",
    "QueuePath",
    "RecordOrderError",
    "SegmentRecord",
    "list_queues",
    "pb_type",
]
