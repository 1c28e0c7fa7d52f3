"""ChunkedSegment: a FileSegment as immutable chunk objects, merged on seal.

Each ``commit0`` writes its bytes as chunk objects of at most ``chunk_size``
bytes at ``seg-{base}/chunk-{position}``, each with ``If-None-Match: *`` and
its CRC32C in the object metadata. A retry that finds its chunk already there
with the same size and CRC has succeeded (the first attempt landed, its answer
was lost); anything else there means another writer owns the segment, which
is then fenced: read-only, and every later commit raises ``SegmentFenced``.

``seal`` writes a ``sealed`` marker recording the final size, merges the
chunks into one ``segment`` object (see :mod:`tieredstore.segment.merge`),
then deletes the chunks and, last, the marker.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import (
    ChunkMissing,
    CommitFailed,
    CommitPositionError,
    ConfigError,
    PreconditionFailed,
    ReadOutOfRange,
    SegmentFenced,
    SegmentFull,
    SegmentSealed,
    StoreClosed,
)
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment.base import FileSegment
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.segment.merge import MergeStats, merge_chunks
from tieredstore.segment.path import SegmentPath
from tieredstore.segment.reader import CRC_METADATA_KEY, DirectReader, SegmentReader
from tieredstore.segment.recovery import (
    SegmentState,
    decode_marker,
    encode_marker,
    recover_segment,
)

log = logging.getLogger(__name__)

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SegmentOptions:
    """How a segment writes and compacts. ``unit_target`` defaults to ``chunk_size``.

    ``merged_metadata`` is user metadata added to the merged object's own
    (``tieredstore-format``), as ``(key, value)`` pairs.
    """

    chunk_size: int = 4 * MiB
    max_size: int | None = None
    merge_on_seal: bool = True
    unit_target: int | None = None
    merge_concurrency: int = 4
    merged_metadata: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ConfigError("chunk_size", f"must be >= 1, got {self.chunk_size}")
        if self.max_size is not None and self.max_size < 1:
            raise ConfigError("max_size", f"must be >= 1, got {self.max_size}")
        if self.merge_concurrency < 1:
            raise ConfigError("merge_concurrency", f"must be >= 1, got {self.merge_concurrency}")

    @property
    def units(self) -> int:
        return self.unit_target or self.chunk_size


class ChunkedSegment(FileSegment):
    """A segment stored as chunk objects until sealed, then as one object."""

    def __init__(
        self,
        store: ObjectStore,
        path: SegmentPath,
        *,
        options: SegmentOptions | None = None,
        reader: SegmentReader | None = None,
        layout: SegmentLayout | None = None,
        state: SegmentState = SegmentState.OPEN,
    ) -> None:
        self.store = store
        self.path = path
        self.options = options or SegmentOptions()
        self.reader: SegmentReader = reader or DirectReader(store)
        self._layout = layout or SegmentLayout()
        self._state = state
        self._lock = asyncio.Lock()
        self._fenced: SegmentFenced | None = None
        self._destroyed = False
        self._leftovers: list[str] = []  # chunks and marker after a merge, to delete
        self.last_merge: MergeStats | None = None

    # --- opening ------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        store: ObjectStore,
        path: SegmentPath,
        *,
        options: SegmentOptions | None = None,
        reader: SegmentReader | None = None,
        repair: bool = True,
    ) -> ChunkedSegment:
        """Recover the segment from a listing of its prefix (empty if none).

        With ``repair`` (the writer's open) it finishes what a crash
        interrupted: aborts multipart uploads left behind, deletes chunks of a
        merged segment, resumes a started merge (if ``merge_on_seal``).
        Readers open with ``repair=False``, which changes nothing in the
        bucket: a merge under way in the writer's process must not be aborted
        by a reader that sees its upload.
        """
        recovered = await recover_segment(store, path)
        segment = cls(store, path, options=options, reader=reader, layout=recovered.layout,
                      state=recovered.state)
        segment._leftovers = recovered.leftovers
        if not repair:
            return segment
        for upload in recovered.uploads:
            await store.abort_multipart(upload.key, upload.upload_id)
        if recovered.state is SegmentState.SEALED and segment._leftovers:
            await segment._delete_leftovers()
        if recovered.state is SegmentState.SEALING and segment.options.merge_on_seal:
            async with segment._lock:
                await segment._merge()
        return segment

    # --- state ------------------------------------------------------------------

    @property
    def commit_position(self) -> int:
        return self._layout.size

    @property
    def sealed(self) -> bool:
        return self._state is not SegmentState.OPEN

    @property
    def merged(self) -> bool:
        return self._state is SegmentState.SEALED

    @property
    def fenced(self) -> bool:
        return self._fenced is not None

    @property
    def layout(self) -> SegmentLayout:
        return self._layout

    def _check_writable(self) -> None:
        if self._destroyed:
            raise StoreClosed(f"segment {self.path} was destroyed")
        if self._fenced is not None:
            raise SegmentFenced(f"fenced earlier: {self._fenced}", segment=str(self.path))
        if self.sealed:
            raise SegmentSealed("segment is sealed", segment=str(self.path))

    def _fence(self, why: str) -> SegmentFenced:
        self._fenced = SegmentFenced(why, segment=str(self.path))
        log.warning("%s", self._fenced)
        return self._fenced

    # --- writing ----------------------------------------------------------------

    async def commit0(self, position: int, data: bytes | memoryview) -> None:
        # docstring inherited
        async with self._lock:
            self._check_writable()
            segment = str(self.path)
            if position != self._layout.size:
                raise CommitPositionError(
                    f"commit at {position}, but the commit position is {self._layout.size}",
                    segment=segment,
                    resume_position=self._layout.size,
                )
            if not data:
                return
            max_size = self.options.max_size
            if max_size is not None and position + len(data) > max_size:
                raise SegmentFull(
                    f"{len(data)} bytes at {position} would pass the maximum size {max_size}",
                    segment=segment,
                )
            await self._write_chunks(position, memoryview(data))

    async def _write_chunks(self, position: int, view: memoryview) -> None:
        # One piece after another, never in parallel: a crash then leaves a
        # contiguous prefix of chunks, never a hole that recovery would have to
        # tell apart from lost data. Parallelism comes from many segments.
        step = self.options.chunk_size
        for offset in range(0, len(view), step):
            try:
                unit, body = await self._put_chunk(position + offset, view[offset : offset + step])
            except SegmentFenced:
                raise
            except Exception as exc:
                raise CommitFailed(
                    f"commit did not fully land: {exc}",
                    segment=str(self.path),
                    resume_position=self._layout.size,
                ) from exc
            self._layout.append(unit)
            self.reader.committed(self.path, unit, body)

    async def _put_chunk(self, position: int, piece: memoryview) -> tuple[ChunkRef, bytes]:
        body = piece.obj if isinstance(piece.obj, bytes) and len(piece) == len(piece.obj) \
            else bytes(piece)
        assert isinstance(body, bytes)
        crc = crc32c(body)
        key = self.path.chunk_key(position)
        try:
            await self.store.put(key, body, if_none_match=True,
                                 metadata={CRC_METADATA_KEY: format_crc(crc)})
        except PreconditionFailed:
            info = await self.store.head(key)
            theirs = info.metadata.get(CRC_METADATA_KEY)
            if info.size != len(body) or theirs != format_crc(crc):
                raise self._fence(
                    f"chunk {key!r} exists with {info.size} bytes and CRC {theirs}, ours has "
                    f"{len(body)} bytes and CRC {format_crc(crc)}: another writer owns it"
                ) from None
            # Our own earlier attempt landed; its answer was lost.
        return ChunkRef(position, len(body), key, 0, crc), body

    # --- sealing ----------------------------------------------------------------

    async def seal(self, *, merge: bool | None = None) -> None:
        """Take no more commits; then merge, unless ``merge`` (default: the
        ``merge_on_seal`` option) is False. Sealing is durable once this returns
        (the marker is written); a later ``seal()`` finishes an unmerged one."""
        do_merge = self.options.merge_on_seal if merge is None else merge
        async with self._lock:
            if self._destroyed:
                raise StoreClosed(f"segment {self.path} was destroyed")
            if self._fenced is not None:
                raise SegmentFenced(f"fenced earlier: {self._fenced}", segment=str(self.path))
            if self._state is SegmentState.OPEN:
                await self._write_marker()
                self._state = SegmentState.SEALING
            if self._state is SegmentState.SEALING and do_merge:
                await self._merge()
            elif self._leftovers:
                await self._delete_leftovers()

    async def _write_marker(self) -> None:
        size = self._layout.size
        try:
            await self.store.put(self.path.sealed_key, encode_marker(size), if_none_match=True)
        except PreconditionFailed:
            theirs = decode_marker(self.path, await self.store.get(self.path.sealed_key))
            if theirs != size:
                raise self._fence(
                    f"sealed marker says {theirs} bytes, we hold {size}: another writer"
                ) from None

    async def _merge(self) -> None:
        # We own the segment: an upload a crashed or fenced merger left is garbage.
        for upload in await self.store.list_multipart_uploads(self.path.base_dir):
            await self.store.abort_multipart(upload.key, upload.upload_id)
        chunks = self._layout
        units, stats = await merge_chunks(
            self.store, self.path, chunks, self.reader,
            unit_target=self.options.units, concurrency=self.options.merge_concurrency,
            metadata=dict(self.options.merged_metadata),
        )
        self._layout = SegmentLayout(units)
        self._state = SegmentState.SEALED
        self.last_merge = stats
        self.reader.forget(self.path)
        self._leftovers = [u.key for u in chunks.units] + [self.path.sealed_key]
        await self._delete_leftovers()

    async def _delete_leftovers(self) -> None:
        """Chunks first, the marker last: its absence means cleanup is done."""
        marker = [k for k in self._leftovers if k == self.path.sealed_key]
        chunks = [k for k in self._leftovers if k != self.path.sealed_key]
        await self.store.delete_many(chunks)
        await self.store.delete_many(marker)
        self._leftovers = []

    # --- reading and deleting ---------------------------------------------------

    async def read0(self, position: int, length: int) -> bytes:
        # docstring inherited
        if self._destroyed:
            raise StoreClosed(f"segment {self.path} was destroyed")
        size = self._layout.size
        if position < 0 or length < 0 or position + length > size:
            raise ReadOutOfRange(
                f"read [{position}, {position + length}) outside [0, {size})",
                segment=str(self.path),
            )
        if length == 0:
            return b""
        relisted = False
        while True:
            layout = self._layout
            try:
                return await self.reader.read(self.path, layout, position, length)
            except ChunkMissing:
                if self._layout is not layout:
                    continue  # our own merge replaced the chunks: read the new object
                if relisted or not self.sealed:
                    raise
                # A merge in another process (the writer's, for a reader) replaced
                # the chunks we listed: list again, once.
                relisted = True
                recovered = await recover_segment(self.store, self.path)
                if recovered.layout.size < position + length:
                    raise
                self._layout, self._state = recovered.layout, recovered.state

    async def destroy(self) -> None:
        # docstring inherited
        async with self._lock:
            await destroy_segment(self.store, self.path)
            self._destroyed = True
            self.reader.forget(self.path)


async def destroy_segment(store: ObjectStore, path: SegmentPath) -> None:
    """Delete every object of a segment, without opening it (even a corrupt one).

    The order keeps a crash midway recoverable: a merged object goes last,
    and a sealed marker goes before chunks, which go from the end backwards.
    """
    for upload in await store.list_multipart_uploads(path.base_dir):
        await store.abort_multipart(upload.key, upload.upload_id)
    keys = [o.key for o in await store.list_all(path.base_dir)]
    merged = [k for k in keys if k == path.merged_key]
    marker = [k for k in keys if k == path.sealed_key]
    rest = sorted((k for k in keys if k not in (path.merged_key, path.sealed_key)), reverse=True)
    if merged:
        await store.delete_many(rest + marker)
        await store.delete_many(merged)
    else:
        await store.delete_many(marker)
        await store.delete_many(rest)
