"""Where a queue's metadata lives in the object store, and what its keys say.

Layout under a root prefix (heads and pages apart, so that opening a whole
store lists every head without listing a single page)::

    {root}/meta/heads/{topic}/{queue_id}/head-{version:020d}
    {root}/meta/pages/{topic}/{queue_id}/{file_type}/page-{first_base_offset:020d}
        -{end_offset:020d}-{first_message_offset:020d}-{max_end_timestamp_ms:020d}
        -{record_count:010d}-{hash:016x}-{prev_hash:016x}

A page key carries what a lookup needs to choose the page without reading it:
its base offset range and first message offset (ascending from page to page,
so bisectable), and the largest end timestamp of its records (a running
maximum over pages makes time lookups bisectable too). ``hash`` is a digest
of the page's bytes and ``prev_hash`` that of the page before it: the head
names the newest page's hash, and the pages it references are the chain
walked back from there. Numbers are zero-padded so that listing order is
numeric order.

Topic names are validated by the caller (the store's key rules); this module
only joins them and refuses what would make a key unparseable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from tieredstore.errors import InvalidName
from tieredstore.filetype import FileType
from tieredstore.metadata import metadata_pb2 as pb

FILE_TYPES: tuple[FileType, ...] = tuple(FileType)

_HEAD = re.compile(r"head-([0-9]{20})")
_PAGE = re.compile(
    r"page-([0-9]{20})-([0-9]{20})-([0-9]{20})-([0-9]{20})-([0-9]{10})"
    r"-([0-9a-f]{16})-([0-9a-f]{16})"
)
_QUEUE_ID = re.compile(r"[0-9]{1,20}")
_MAX_KEY_NUMBER = 10**20 - 1
_MAX_PAGE_RECORDS = 10**10 - 1


def check_file_type(file_type: int) -> FileType:
    """The file type, or ``ValueError`` for one the format does not know."""
    try:
        return FileType(file_type)
    except ValueError:
        raise ValueError(f"unknown file type {file_type!r}; expected one of "
                         f"{[int(t) for t in FILE_TYPES]}") from None


def pb_type(file_type: FileType) -> pb.FileType:
    """``file_type`` typed as the protobuf field holds it (the same number)."""
    return cast("pb.FileType", int(check_file_type(file_type)))


def file_type_dir(file_type: FileType) -> str:
    """The path part of a file type: ``commit_log``, ``consume_queue``, ``index``."""
    return check_file_type(file_type).name.lower()


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def heads_root(root: str) -> str:
    """The prefix under which every queue's heads live, ending in ``/``."""
    return _join(root.rstrip("/"), "meta", "heads") + "/"


@dataclass(frozen=True, slots=True)
class PageRef:
    """What a page's key says of it. The page covers base offsets
    ``[first_base_offset, end_offset)``."""

    key: str
    first_base_offset: int
    end_offset: int
    first_message_offset: int
    max_end_timestamp_ms: int
    record_count: int
    page_hash: int
    prev_hash: int


@dataclass(frozen=True, slots=True)
class QueuePath:
    """The metadata keys of one queue under ``root``."""

    root: str
    topic: str
    queue_id: int

    def __post_init__(self) -> None:
        if not self.topic or "/" in self.topic or self.topic in (".", ".."):
            raise InvalidName("topic", self.topic, "must be a non-empty single key part")
        if isinstance(self.queue_id, bool) or not isinstance(self.queue_id, int):
            raise InvalidName("queue id", str(self.queue_id), "must be an int")
        if self.queue_id < 0:
            raise InvalidName("queue id", str(self.queue_id), "must be >= 0")

    @property
    def name(self) -> str:
        """``topic/queue_id``, for messages."""
        return f"{self.topic}/{self.queue_id}"

    @property
    def heads_prefix(self) -> str:
        return heads_root(self.root) + f"{self.topic}/{self.queue_id}/"

    def head_key(self, version: int) -> str:
        if not 0 < version <= _MAX_KEY_NUMBER:
            raise ValueError(f"head version {version} out of range")
        return f"{self.heads_prefix}head-{version:020d}"

    def head_version(self, key: str) -> int | None:
        """The version a head key names, or None for a key that is no head."""
        if not key.startswith(self.heads_prefix):
            return None
        match = _HEAD.fullmatch(key[len(self.heads_prefix) :])
        return int(match.group(1)) if match else None

    def pages_prefix(self, file_type: FileType) -> str:
        return _join(
            self.root.rstrip("/"), "meta", "pages", self.topic, str(self.queue_id),
            file_type_dir(file_type),
        ) + "/"

    def page_ref(
        self,
        file_type: FileType,
        records: Sequence[pb.SegmentRecord],
        page_hash: int,
        prev_hash: int,
    ) -> PageRef:
        """The key of the page that holds ``records`` (non-empty, in order)."""
        if not records:
            raise ValueError("a page holds at least one record")
        first, last = records[0], records[-1]
        end = last.base_offset + last.size
        max_end = max(r.end_timestamp_ms for r in records)
        numbers = (first.base_offset, end, first.first_message_offset, max_end)
        if any(not 0 <= n <= _MAX_KEY_NUMBER for n in numbers):
            raise ValueError(f"page numbers {numbers} do not fit a page key")
        if len(records) > _MAX_PAGE_RECORDS:
            raise ValueError(f"{len(records)} records do not fit one page")
        if not (0 < page_hash < 2**64 and 0 <= prev_hash < 2**64):
            raise ValueError(f"page hashes {page_hash}, {prev_hash} out of range")
        key = (
            f"{self.pages_prefix(file_type)}page-{first.base_offset:020d}-{end:020d}"
            f"-{first.first_message_offset:020d}-{max_end:020d}-{len(records):010d}"
            f"-{page_hash:016x}-{prev_hash:016x}"
        )
        return PageRef(
            key, first.base_offset, end, first.first_message_offset, max_end, len(records),
            page_hash, prev_hash,
        )

    def parse_page_key(self, file_type: FileType, key: str) -> PageRef | None:
        """What a page key says, or None for a key that is no page of this type."""
        prefix = self.pages_prefix(file_type)
        if not key.startswith(prefix):
            return None
        match = _PAGE.fullmatch(key[len(prefix) :])
        if match is None:
            return None
        base, end, msg, ts, count = (int(g) for g in match.groups()[:5])
        page_hash, prev_hash = (int(g, 16) for g in match.groups()[5:])
        return PageRef(key, base, end, msg, ts, count, page_hash, prev_hash)


def parse_queue_head_key(root: str, key: str) -> tuple[str, int] | None:
    """``(topic, queue_id)`` of a head key under ``root``, or None."""
    prefix = heads_root(root)
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) != 3 or _QUEUE_ID.fullmatch(parts[1]) is None:
        return None
    if not parts[0] or _HEAD.fullmatch(parts[2]) is None:
        return None
    return parts[0], int(parts[1])
