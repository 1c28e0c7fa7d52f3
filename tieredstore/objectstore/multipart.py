"""One object written as it comes: one PUT, or one multipart upload, created once.

:class:`ObjectWriter` is the one writer of large objects (a merged segment,
an offloaded ledger's data object), in the spirit of AutoMQ's
``ObjectWriter``: the caller appends bytes (:meth:`~ObjectWriter.write`,
buffered into parts of at least ``part_size``), ranges of other objects
(:meth:`~ObjectWriter.copy`, UploadPartCopy server-side) and whole parts whose
bytes are fetched when their turn comes (:meth:`~ObjectWriter.write_part`),
then :meth:`~ObjectWriter.finish`.

- Bytes that never fill a part, with no copy or whole part, go as one PUT;
  anything else is a multipart upload, begun at its first part. Up to
  ``concurrency`` parts are in flight at once; an append returns once a slot
  is free for the next one.
- S3's floor: every part but the last holds at least 5 MiB
  (:data:`~tieredstore.objectstore.base.MIN_PART_SIZE`). A copy that would
  leave a smaller part behind it (pending bytes under the floor) or that is
  itself under it is read and appended as bytes instead, as AutoMQ's
  ``copyWrite`` does; a whole part under the floor followed by another part
  is the caller's error (``ValueError``).
- Created once: the PUT and the completion carry ``If-None-Match: *``. A key
  found taken (412, or an upload gone: what a retry after a lost reply gets)
  is ours when ``is_ours`` says so (by default: a HEAD shows our size and
  every metadata entry we sent, which must name the writer), and
  :meth:`~ObjectWriter.finish` returns True; else False, and the caller
  raises its layer's fenced error (docs/chunks.md, "Merged segment object",
  "Offloaded ledgers"; :func:`~tieredstore.objectstore.conditional.create_once`).
- Any failure aborts the upload (:meth:`~ObjectWriter.abort`; a caller
  whose own step fails after appending calls it too), so no upload is left
  behind; nor is one whose completion found the key taken.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping

from tieredstore.errors import NoSuchUpload, PreconditionFailed
from tieredstore.objectstore.base import MIN_PART_SIZE, ByteRange, ObjectStore, PartInfo
from tieredstore.objectstore.conditional import holds_metadata

IsOurs = Callable[[], Awaitable[bool]]
"""Whether the object found at a taken key is this writer's own."""


class ObjectWriter:
    """Writes ``key`` once: one PUT or one multipart upload (module docstring)."""

    def __init__(self, store: ObjectStore, key: str, *,
                 metadata: Mapping[str, str] | None = None,
                 part_size: int = MIN_PART_SIZE, concurrency: int = 1) -> None:
        if part_size < MIN_PART_SIZE:
            raise ValueError(f"part_size {part_size} is below S3's minimum part "
                             f"({MIN_PART_SIZE} bytes)")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.store = store
        self.key = key
        self.metadata = dict(metadata or {})
        self.part_size = part_size
        self.size = 0
        """Bytes appended so far: the object's size once finished."""
        self.upload_id: str | None = None
        self._pending = bytearray()
        self._parts: dict[int, PartInfo] = {}
        self._sizes: list[int] = []  # of the parts begun, in order
        self._tasks: list[asyncio.Task[None]] = []
        self._slots = asyncio.Semaphore(concurrency)

    @property
    def parts(self) -> int:
        """Parts begun (0 for an object written by one PUT)."""
        return len(self._sizes)

    # --- appending -------------------------------------------------------------------

    async def write(self, data: bytes | memoryview) -> None:
        """Append ``data``; a part goes as soon as ``part_size`` bytes are pending."""
        self._pending += data
        self.size += len(data)
        if len(self._pending) >= self.part_size:
            await self._flush()

    async def copy(self, source: str, byte_range: ByteRange) -> None:
        """Append ``byte_range`` of the object ``source``, copied server-side as a
        part of its own; read and appended as bytes when a part under S3's
        floor would result (module docstring)."""
        if 0 < len(self._pending) < MIN_PART_SIZE or byte_range.length < MIN_PART_SIZE:
            data = await self.store.get(source, byte_range)
            if len(data) != byte_range.length:
                raise ValueError(f"{source}: {byte_range} runs past the object's end "
                                 f"({len(data)} bytes read)")
            await self.write(data)
            return
        await self._flush()
        self.size += byte_range.length
        upload_id, number = await self._begin(byte_range.length)
        await self._spawn(number, lambda: self.store.upload_part_copy(
            self.key, upload_id, number, source, byte_range))

    async def write_part(self, size: int, read: Callable[[], Awaitable[bytes]]) -> None:
        """Append one whole part of ``size`` bytes, which ``read()`` returns when
        the part's turn comes (so at most ``concurrency`` are held at once)."""
        if 0 < len(self._pending) < MIN_PART_SIZE:
            raise ValueError(f"{self.key}: {len(self._pending)} bytes pending, under "
                             f"S3's minimum part ({MIN_PART_SIZE}), before a whole part")
        await self._flush()
        self.size += size
        upload_id, number = await self._begin(size)

        async def upload() -> PartInfo:
            data = await read()
            if len(data) != size:
                raise ValueError(f"{self.key}: part {number} read {len(data)} bytes, "
                                 f"{size} announced")
            return await self.store.upload_part(self.key, upload_id, number, data)

        await self._spawn(number, upload)

    async def _flush(self) -> None:
        """Send the pending bytes as the next part."""
        if not self._pending:
            return
        data = bytes(self._pending)
        self._pending.clear()
        upload_id, number = await self._begin(len(data))
        await self._spawn(number, lambda: self.store.upload_part(
            self.key, upload_id, number, data))

    async def _begin(self, size: int) -> tuple[str, int]:
        """The upload (begun now if need be) and the next part's number."""
        if self._sizes and self._sizes[-1] < MIN_PART_SIZE:
            raise ValueError(f"{self.key}: part {len(self._sizes)} holds {self._sizes[-1]} "
                             f"bytes; every part but the last needs {MIN_PART_SIZE}")
        if self.upload_id is None:
            self.upload_id = await self.store.create_multipart(self.key,
                                                               metadata=self.metadata)
        self._sizes.append(size)
        return self.upload_id, len(self._sizes)

    async def _spawn(self, number: int, send: Callable[[], Awaitable[PartInfo]]) -> None:
        """Send a part in the background; return once a slot is free again."""
        await self._slots.acquire()

        async def run() -> None:
            try:
                self._parts[number] = await send()
            finally:
                self._slots.release()

        self._tasks.append(asyncio.create_task(run()))
        async with self._slots:  # a free slot for the next part
            pass
        if any(t.done() and not t.cancelled() and t.exception() for t in self._tasks):
            await self._settle()  # raises the part's failure

    async def _settle(self) -> None:
        """Wait for the parts in flight; the first failure raises, the rest are
        cancelled."""
        try:
            await asyncio.gather(*self._tasks)
        except BaseException:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            raise

    # --- finishing -------------------------------------------------------------------

    async def finish(self, *, is_ours: IsOurs | None = None) -> bool:
        """Create the object: True if it is ours (created now, or by our own
        earlier attempt whose reply was lost), False if the key holds another's.
        Any failure aborts the upload before it raises."""
        try:
            return await self._finish(is_ours or self._matches)
        except BaseException:
            await self.abort()
            raise

    async def _finish(self, is_ours: IsOurs) -> bool:
        if self.upload_id is None:
            try:
                await self.store.put(self.key, bytes(self._pending), if_none_match=True,
                                     metadata=self.metadata)
                return True
            except PreconditionFailed:
                return await is_ours()
        await self._flush()
        await self._settle()
        parts = [self._parts[n] for n in range(1, len(self._sizes) + 1)]
        try:
            await self.store.complete_multipart(self.key, self.upload_id, parts,
                                                if_none_match=True)
        except (PreconditionFailed, NoSuchUpload):
            # Our own completion landed (its reply lost), or another writer's
            # object stands: ours is not needed either way.
            await self.abort()
            return await is_ours()
        self.upload_id = None
        return True

    async def _matches(self) -> bool:
        return await holds_metadata(self.store, self.key, self.size, self.metadata)

    async def abort(self) -> None:
        """Stop the parts in flight and abort the upload (its errors ignored)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.upload_id is not None:
            upload_id, self.upload_id = self.upload_id, None
            with contextlib.suppress(Exception):
                await self.store.abort_multipart(self.key, upload_id)
