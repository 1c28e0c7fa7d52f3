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

Topic names and queue ids follow the naming rules of every key
(:mod:`tieredstore.names`), as in the segments' keys.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import tieredstore.metadata.metadata_pb2 as pb
from tieredstore.filetype import FileType
from tieredstore.names import validate_name, validate_offset

FILE_TYPES: tuple[FileType, ...] = tuple(FileType)

_HEAD = re.compile(r"head-([0-9]{20})")
_QUEUE_ID = re.compile(r"[0-9]{1,20}")


def head_name(version: int) -> str:
    """The last part of head ``version``'s key: ``head-{version:020d}``."""
    if not 0 < version < 10**20:
        raise ValueError(f"head version {version} out of range")
    return f"head-{version:020d}"


def head_name_version(name: str) -> int | None:
    """The version a head key's last part names, or None for no head."""
    match = _HEAD.fullmatch(name)
    return int(match.group(1)) if match else None


class PageNames:
    """The last part of page keys (queue pages, managed-ledger pages):
    ``page-{n1}-...-{nk}-{hash:016x}-{prev_hash:016x}``, each number zero-padded
    to its width (so that listing order is numeric order)."""

    def __init__(self, *widths: int) -> None:
        self.widths = widths
        self._pattern = re.compile(
            "page-" + "".join(f"([0-9]{{{w}}})-" for w in widths) + "([0-9a-f]{16})-([0-9a-f]{16})"
        )

    def name(self, numbers: Sequence[int], page_hash: int, prev_hash: int) -> str:
        if any(not 0 <= n < 10**w for n, w in zip(numbers, self.widths, strict=True)):
            raise ValueError(f"page numbers {tuple(numbers)} do not fit a page key")
        if not (0 < page_hash < 2**64 and 0 <= prev_hash < 2**64):
            raise ValueError(f"page hashes {page_hash}, {prev_hash} out of range")
        padded = "".join(f"{n:0{w}d}-" for n, w in zip(numbers, self.widths, strict=True))
        return f"page-{padded}{page_hash:016x}-{prev_hash:016x}"

    def parse(self, name: str) -> tuple[int, ...] | None:
        """The numbers of a name, then its hash and its previous page's hash; None
        for no page name."""
        match = self._pattern.fullmatch(name)
        if match is None:
            return None
        *numbers, page_hash, prev_hash = match.groups()
        return (*map(int, numbers), int(page_hash, 16), int(prev_hash, 16))


# first base offset, end offset, first message offset, max end timestamp, record count
_PAGE_NAMES = PageNames(20, 20, 20, 20, 10)


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
        validate_name("topic", self.topic)
        validate_offset("queue_id", self.queue_id)

    @property
    def name(self) -> str:
        """``topic/queue_id``, for messages."""
        return f"{self.topic}/{self.queue_id}"

    @property
    def heads_prefix(self) -> str:
        return heads_root(self.root) + f"{self.topic}/{self.queue_id}/"

    def head_key(self, version: int) -> str:
        return self.heads_prefix + head_name(version)

    def head_version(self, key: str) -> int | None:
        """The version a head key names, or None for a key that is no head."""
        if not key.startswith(self.heads_prefix):
            return None
        return head_name_version(key[len(self.heads_prefix) :])

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
        numbers = (first.base_offset, last.base_offset + last.size, first.first_message_offset,
                   max(r.end_timestamp_ms for r in records), len(records))
        key = self.pages_prefix(file_type) + _PAGE_NAMES.name(numbers, page_hash, prev_hash)
        return PageRef(key, *numbers, page_hash, prev_hash)

    def parse_page_key(self, file_type: FileType, key: str) -> PageRef | None:
        """What a page key says, or None for a key that is no page of this type."""
        prefix = self.pages_prefix(file_type)
        found = _PAGE_NAMES.parse(key[len(prefix) :]) if key.startswith(prefix) else None
        return PageRef(key, *found) if found is not None else None


def parse_queue_head_key(root: str, key: str) -> tuple[str, int] | None:
    """``(topic, queue_id)`` of a head key under ``root``, or None."""
    prefix = heads_root(root)
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) != 3 or _QUEUE_ID.fullmatch(parts[1]) is None:
        return None
    if not parts[0] or head_name_version(parts[2]) is None:
        return None
    return parts[0], int(parts[1])
