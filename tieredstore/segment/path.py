"""Segment identity and object keys.

``{prefix}/{h}/{cluster}/{broker}/{topic}/{queue}/{type}/seg-{base:020d}/chunk-{pos:020d}``
and ``.../seg-{base:020d}/segment`` once merged, ``.../seg-{base:020d}/sealed``
while a seal is under way. ``h`` is four hex digits of a hash of the path, to
spread S3 request-rate partitions. Numbers are zero-padded to 20 digits so
that listing order is numeric order.
"""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore.errors import InvalidName
from tieredstore.filetype import FileType
from tieredstore.names import hashed_dir, validate_name, validate_offset, validate_prefix

CHUNK_PREFIX = "chunk-"
MERGED_NAME = "segment"
SEALED_NAME = "sealed"
SLOTS_NAME = "slots"  # a sealed index segment's slot object (docs/records.md, Key index)
MAX_SLOT = 999_999


@dataclass(frozen=True, slots=True, order=True)
class EntryId:
    """Where an entry of a segment's chunk series sits: a byte position and a
    slot, so that zero-byte entries (fences, seals) at one position are
    ordered too. See docs/chunks.md, *Chunk series*."""

    position: int
    slot: int = 0

    def after(self, size: int) -> EntryId:
        """The id of the entry that follows this one, if this one holds ``size`` bytes."""
        return EntryId(self.position + size, 0) if size else EntryId(self.position,
                                                                      self.slot + 1)


def chunk_name(position: int, slot: int = 0) -> str:
    if slot:
        return f"{CHUNK_PREFIX}{position:020d}-{slot:06d}"
    return f"{CHUNK_PREFIX}{position:020d}"


def parse_chunk_name(name: str) -> EntryId | None:
    """The entry id a chunk object name encodes, or None if it is not one."""
    if not name.startswith(CHUNK_PREFIX):
        return None
    digits, dash, slot = name[len(CHUNK_PREFIX) :].partition("-")
    if len(digits) != 20 or not digits.isdigit():
        return None
    if not dash:
        return EntryId(int(digits))
    if len(slot) != 6 or not slot.isdigit() or int(slot) == 0:
        return None
    return EntryId(int(digits), int(slot))


@dataclass(frozen=True, slots=True, order=True)
class SegmentPath:
    """Where a logical segment lives: one flat file of one queue, from ``base_offset``."""

    cluster: str
    broker: str
    topic: str
    queue_id: int
    file_type: FileType
    base_offset: int
    prefix: str = "tieredstore"

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        validate_name("cluster", self.cluster)
        validate_name("broker", self.broker)
        validate_name("topic", self.topic)
        validate_offset("queue_id", self.queue_id)
        if not isinstance(self.file_type, FileType):
            raise InvalidName("file_type", str(self.file_type), "must be a FileType")
        validate_offset("base_offset", self.base_offset)

    @property
    def queue_path(self) -> str:
        """``cluster/broker/topic/queue/type``: the file this segment belongs to."""
        return (
            f"{self.cluster}/{self.broker}/{self.topic}/{self.queue_id}/{self.file_type.label}"
        )

    @property
    def file_prefix(self) -> str:
        """The key prefix of every segment of this file, ending in ``/``."""
        return hashed_dir(self.prefix, self.queue_path)

    @property
    def base_dir(self) -> str:
        """The key prefix of this segment's objects, ending in ``/``."""
        return f"{self.file_prefix}seg-{self.base_offset:020d}/"

    def chunk_key(self, position: int, slot: int = 0) -> str:
        if not 0 <= slot <= MAX_SLOT:
            raise InvalidName("slot", str(slot), f"must be in [0, {MAX_SLOT}]")
        return self.base_dir + chunk_name(validate_offset("position", position), slot)

    def entry_key(self, entry: EntryId) -> str:
        return self.chunk_key(entry.position, entry.slot)

    @property
    def merged_key(self) -> str:
        return self.base_dir + MERGED_NAME

    @property
    def sealed_key(self) -> str:
        return self.base_dir + SEALED_NAME

    def __str__(self) -> str:
        return f"{self.queue_path}@{self.base_offset}"


def parse_segment_dir(name: str) -> int | None:
    """The base offset in a ``seg-{base:020d}`` directory name, or None."""
    digits = name[4:]
    if name.startswith("seg-") and len(digits) == 20 and digits.isdigit():
        return int(digits)
    return None
