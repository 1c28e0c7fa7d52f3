"""The ObjectStore port: the few object-store operations the engine needs.

Every backend (S3, local directory, memory) implements this one async
interface with S3 semantics, so that a test on memory means what it means on
S3: immutable objects, ``If-None-Match: *`` conditional creates, inclusive
byte ranges, pages of at most 1,000 keys, multipart uploads whose parts but
the last are at least 5 MiB.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from tieredstore.checksum import crc32c
from tieredstore.errors import InvalidRequest
from tieredstore.objectstore.chokepoint import Chokepoint, RequestMetrics

# S3's limits. Backends that emulate S3 enforce the same numbers.
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PART_SIZE = 5 * 1024 * 1024 * 1024
MAX_PARTS = 10_000
MAX_LIST_PAGE = 1_000
MAX_DELETE_BATCH = 1_000


@dataclass(frozen=True, slots=True)
class ByteRange:
    """Bytes ``[start, start + length)`` of an object."""

    start: int
    length: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.length <= 0:
            raise InvalidRequest(f"bad byte range start={self.start} length={self.length}")

    @property
    def end(self) -> int:
        """Exclusive end."""
        return self.start + self.length

    def http_header(self) -> str:
        """The HTTP Range header value; its end is inclusive."""
        return f"bytes={self.start}-{self.end - 1}"


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a HEAD or a listing says of an object."""

    key: str
    size: int
    etag: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    modified: datetime | None = None  # from listings: when the object was written


@dataclass(frozen=True, slots=True)
class ObjectData:
    """A GET's answer: the bytes, and the object's info (its whole size and user
    metadata, which S3 returns with ranged GETs too). ``crc32c``: the CRC32C of
    ``data``, from :meth:`ObjectStore.get_object_with_crc` only."""

    data: bytes | memoryview  # read-only either way (see LocalObjectStore: a mapping)
    info: ObjectInfo
    crc32c: int | None = None


@dataclass(frozen=True, slots=True)
class PartInfo:
    """One uploaded part of a multipart upload."""

    part_number: int
    etag: str
    size: int


@dataclass(frozen=True, slots=True)
class UploadInfo:
    """A multipart upload that was begun and not completed or aborted."""

    key: str
    upload_id: str
    initiated: datetime | None = None


class TemporaryFiles(Protocol):
    """A backend's own files beside its objects (a local directory's
    half-written temporaries left by a kill)."""

    async def stale(self, older_than: datetime) -> list[str]:
        """Those last changed before ``older_than``, by name."""

    async def delete(self, names: Sequence[str]) -> None:
        """Delete what :meth:`stale` named."""


class ObjectStore(abc.ABC):
    """Async object-store interface. Keys are ``/``-separated strings.

    Implementations raise only :mod:`tieredstore.errors` types:
    ``ObjectNotFound`` for missing keys, ``NoSuchUpload`` for unknown upload
    ids, ``PreconditionFailed`` when a conditional create finds the key taken,
    ``InvalidRequest`` for malformed requests, ``TransientError`` subclasses
    for failures worth retrying.
    """

    name: str = "abstract"

    # What the store can do (zarr's ``supports_*``): readers and writers check
    # these instead of the store's class.
    supports_writes: bool = True
    """False for a store opened read-only (:class:`ReadOnlyObjectStore`): every
    write raises :class:`~tieredstore.errors.ReadOnly` and sends nothing."""
    runs_in_threads: bool = False
    """Whether requests run blocking calls in worker threads (the local
    directory). Each call of theirs that releases the GIL then waits for it
    again while the event loop's thread computes, up to the interpreter's
    switch interval (5 ms): a producer appending from that loop hands it over
    now and then (``PoolOptions.thread_handoff``)."""
    temporary_files: TemporaryFiles | None = None
    """Files the backend keeps beside the objects (the local directory's
    half-written temporaries), for garbage collection; None for object stores
    proper."""

    def __init__(self, *, chokepoint: Chokepoint | None = None) -> None:
        self.chokepoint = chokepoint or Chokepoint()

    @property
    def metrics(self) -> RequestMetrics:
        """Requests, bytes, retries and errors by operation, for this store."""
        return self.chokepoint.metrics

    @abc.abstractmethod
    async def put(
        self,
        key: str,
        data: bytes | memoryview,
        *,
        if_none_match: bool = False,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Store ``data`` at ``key``. With ``if_none_match`` only if the key is free."""

    @abc.abstractmethod
    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        """Return the object's bytes, or the range of them, with its info.

        A range that starts inside the object but runs past its end returns the
        bytes that exist (as S3 does); callers that need the exact length check
        it. A range that starts at or past the end raises ``InvalidRequest``.
        """

    async def get_object_with_crc(self, key: str, byte_range: ByteRange | None = None
                                  ) -> ObjectData:
        """:meth:`get_object`, with the CRC32C of the bytes in ``crc32c``, for a
        reader that checks them. A backend that reads in worker threads computes
        it there (the C function lets go of the GIL), off the event loop's
        thread; this default computes it here."""
        got = await self.get_object(key, byte_range)
        return ObjectData(got.data, got.info, crc32c(got.data))

    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | memoryview:
        """The object's bytes, or the range of them (see :meth:`get_object`)."""
        return (await self.get_object(key, byte_range)).data

    @abc.abstractmethod
    async def head(self, key: str) -> ObjectInfo:
        """Size, ETag and user metadata of an object."""

    @abc.abstractmethod
    def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        """Every object under ``prefix`` in key order, a page (<= 1,000) at a time."""

    async def list_all(self, prefix: str) -> list[ObjectInfo]:
        """Every object under ``prefix`` in key order, across all pages."""
        out: list[ObjectInfo] = []
        async for page in self.list_pages(prefix):
            out.extend(page)
        return out

    @abc.abstractmethod
    async def delete_many(self, keys: Sequence[str]) -> None:
        """Delete keys, in batches of at most 1,000; missing keys are not an error."""

    async def delete(self, key: str) -> None:
        """Delete one key; a missing key is not an error."""
        await self.delete_many([key])

    # --- multipart ----------------------------------------------------------

    @abc.abstractmethod
    async def create_multipart(
        self, key: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        """Begin a multipart upload; return its upload id."""

    @abc.abstractmethod
    async def upload_part(
        self, key: str, upload_id: str, part_number: int, data: bytes | memoryview
    ) -> PartInfo:
        """Upload part ``part_number`` (1..10,000)."""

    @abc.abstractmethod
    async def upload_part_copy(
        self,
        key: str,
        upload_id: str,
        part_number: int,
        source_key: str,
        source_range: ByteRange,
    ) -> PartInfo:
        """Copy ``source_range`` of ``source_key`` server-side as a part."""

    @abc.abstractmethod
    async def complete_multipart(
        self,
        key: str,
        upload_id: str,
        parts: Sequence[PartInfo],
        *,
        if_none_match: bool = False,
    ) -> ObjectInfo:
        """Assemble the parts. Every part but the last must be >= 5 MiB."""

    @abc.abstractmethod
    async def abort_multipart(self, key: str, upload_id: str) -> None:
        """Abort an upload and drop its parts; an unknown id is not an error."""

    @abc.abstractmethod
    async def list_multipart_uploads(self, prefix: str) -> list[UploadInfo]:
        """Uploads begun under ``prefix`` and neither completed nor aborted."""

    # --- lifecycle ----------------------------------------------------------

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. The store is unusable afterwards."""

    async def __aenter__(self) -> ObjectStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def check_part_number(key: str, part_number: int) -> None:
    """Refuse part numbers S3 would refuse."""
    if not 1 <= part_number <= MAX_PARTS:
        raise InvalidRequest(
            f"part number {part_number} outside 1..{MAX_PARTS}", op="upload_part", key=key
        )

