"""The one listing of segment directories: what each object in one is.

Every reader of a segment directory's names goes through here (recovery,
cleanup, garbage collection, the rebuild, the read-only views, compaction,
the offload sweep): a directory ``seg-{base:020d}/`` holds

- the chunk series (``chunk-{pos}`` and ``chunk-{pos}-{slot}``): data chunks,
  and zero-byte fence and seal entries (docs/chunks.md, *Chunk series*);
- a ``segment`` object once merged, and a ``sealed`` marker while a seal is
  under way; a sealed key-index segment's ``slots`` object;
- anything else: a *foreign* object (not ours), set aside, never read and
  never deleted;

and open multipart uploads (a merge under way, or one whose writer died),
when asked. The state is read off the names: a ``segment`` object means
sealed and merged, a ``sealed`` marker alone a seal under way, neither open
(an open segment's series may still end in a seal entry: recovery looks).
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tieredstore.errors import InvalidName
from tieredstore.filetype import FileType
from tieredstore.objectstore.base import ObjectInfo, ObjectStore, UploadInfo
from tieredstore.segment.path import (
    MERGED_NAME,
    SEALED_NAME,
    SLOTS_NAME,
    SegmentPath,
    parse_chunk_name,
    parse_segment_dir,
)


class SegmentState(enum.Enum):
    OPEN = "open"
    SEALING = "sealing"  # sealed marker written, merge not finished
    SEALED = "sealed"


@dataclass(slots=True)
class SegmentListing:
    """One segment directory's objects (key order), sorted into what they are."""

    path: SegmentPath
    objects: list[ObjectInfo] = field(default_factory=list)
    chunks: list[ObjectInfo] = field(default_factory=list)  # the series, data and zero-byte
    merged: ObjectInfo | None = None
    marker: ObjectInfo | None = None
    foreign: list[str] = field(default_factory=list)  # keys tieredstore did not write
    uploads: list[UploadInfo] = field(default_factory=list)  # only when listed

    @property
    def state(self) -> SegmentState:
        """From the names alone: merged, a seal under way, or open."""
        if self.merged is not None:
            return SegmentState.SEALED
        return SegmentState.SEALING if self.marker is not None else SegmentState.OPEN

    @property
    def data_chunks(self) -> list[ObjectInfo]:
        """The chunks that hold bytes (fence and seal entries are empty)."""
        return [c for c in self.chunks if c.size]

    @property
    def holds_bytes(self) -> bool:
        """Whether any object holds bytes: a directory of zero-byte entries alone
        is a segment retention deleted, which nothing counts as a segment."""
        return any(o.size for o in self.objects)

    @property
    def leftovers(self) -> list[ObjectInfo]:
        """Beside a merged object: its data chunks, then the sealed marker (what a
        merge's cleanup deletes, the marker last); zero-byte entries stay."""
        if self.merged is None:
            return []
        return self.data_chunks + ([self.marker] if self.marker is not None else [])

    def older_than(self, cutoff: datetime) -> bool:
        """Whether every object and upload was last written before ``cutoff``."""
        return (all(before(o.modified, cutoff) for o in self.objects)
                and all(before(u.initiated, cutoff) for u in self.uploads))


def before(when: datetime | None, cutoff: datetime) -> bool:
    """Whether a listed time (last modified, upload begun) is known and before ``cutoff``."""
    return when is not None and when < cutoff


def classify(path: SegmentPath, objects: Iterable[ObjectInfo],
             uploads: Iterable[UploadInfo] = ()) -> SegmentListing:
    """Sort the objects of ``path.base_dir`` (and its uploads) into a listing."""
    listing = SegmentListing(path, sorted(objects, key=lambda o: o.key), uploads=list(uploads))
    for obj in listing.objects:
        name = obj.key[len(path.base_dir):]
        if name == MERGED_NAME:
            listing.merged = obj
        elif name == SEALED_NAME:
            listing.marker = obj
        elif parse_chunk_name(name) is not None:
            listing.chunks.append(obj)
        elif name != SLOTS_NAME:  # slots: derived from the sealed segment, read by key
            listing.foreign.append(obj.key)
    return listing


async def list_segment(store: ObjectStore, path: SegmentPath, *, uploads: bool = False
                       ) -> SegmentListing:
    """One segment's directory, every page (and its uploads with ``uploads``)."""
    objects = await store.list_all(path.base_dir)
    found = await store.list_multipart_uploads(path.base_dir) if uploads else []
    return classify(path, objects, found)


async def list_file(store: ObjectStore, path: SegmentPath, *, uploads: bool = False,
                    keys: Sequence[ObjectInfo] | None = None) -> dict[int, SegmentListing]:
    """Every segment of ``path``'s flat file with objects (one paged LIST, and one
    of uploads with ``uploads``), by base offset. ``keys``: a listing (sorted by
    key) of a prefix holding the flat file's, made already: its objects are
    taken from it, with no LIST of their own."""
    prefix = path.file_prefix
    found = await store.list_multipart_uploads(prefix) if uploads else []
    objects = await store.list_all(prefix) if keys is None else under(keys, prefix)
    listed = group_segments(path.prefix, objects, found)
    return {p.base_offset: listing for p, listing in sorted(listed.items())}


def under(keys: Sequence[ObjectInfo], prefix: str) -> list[ObjectInfo]:
    """The objects of ``keys`` (sorted by key) whose keys start with ``prefix``."""
    start = bisect.bisect_left(keys, prefix, key=lambda o: o.key)
    end = start
    while end < len(keys) and keys[end].key.startswith(prefix):
        end += 1
    return list(keys[start:end])


def group_segments(prefix: str, objects: Iterable[ObjectInfo],
                   uploads: Iterable[UploadInfo] = ()) -> dict[SegmentPath, SegmentListing]:
    """A listing of a key prefix (a whole store's, or one file's) split into the
    segments it holds, any cluster, broker, queue and file type: keys outside a
    segment directory (:func:`segment_of_key`) are left out."""
    objs: dict[str, list[ObjectInfo]] = {}
    ups: dict[str, list[UploadInfo]] = {}
    for info in objects:
        objs.setdefault(info.key.rpartition("/")[0], []).append(info)
    for upload in uploads:
        ups.setdefault(upload.key.rpartition("/")[0], []).append(upload)
    out: dict[SegmentPath, SegmentListing] = {}
    for directory in {*objs, *ups}:
        path = segment_of_key(directory + "/", prefix)
        if path is not None:
            out[path] = classify(path, objs.get(directory, ()), ups.get(directory, ()))
    return out


def segment_of_key(key: str, prefix: str) -> SegmentPath | None:
    """The segment an object key under ``prefix`` lies in, or None for any other
    key (the hash part of the key must match its path)."""
    head = f"{prefix}/" if prefix else ""
    parts = key[len(head):].split("/") if key.startswith(head) else []
    if len(parts) != 8:  # h/cluster/broker/topic/queue/type/seg-{base}/name
        return None
    _, cluster, broker, topic, queue, label, directory, _ = parts
    base = parse_segment_dir(directory)
    types = {t.label: t for t in FileType}
    if base is None or not queue.isdigit() or label not in types:
        return None
    try:
        path = SegmentPath(cluster, broker, topic, int(queue), types[label], base, prefix)
    except InvalidName:
        return None
    return path if key.startswith(path.base_dir) else None
