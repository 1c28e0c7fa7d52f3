"""Fetcher: the cached, read-ahead implementation of ``SegmentReader``.

Each unit a read needs is looked for, in order, in the memory tier, then in
a load already in flight for the same unit (shared: a unit is never loaded
twice at once), and a new load looks in the disk tier before it GETs the
unit from the object store with :func:`fetch_unit` (one ranged GET of the
whole unit, CRC32C checked). The disk lookup sits inside the shared load, so
concurrent readers of a unit coalesce on the disk read as well as on the
GET. Missing units of one read load in parallel; GETs are bounded by
``read_concurrency``, read-ahead GETs by half of it.

Units are cached under ``(key, object_offset, length)``. After a sequential
read, the segment's :class:`ReadAheadWindow` names the next units and they
load in the background, as far as the memory budget has room for them beside
the units just read (prefetch never evicts what is being read). Units this
process commits go straight into the memory tier, so a tailing reader never
waits on the object store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import Any

from tieredstore.errors import ConfigError, StoreClosed
from tieredstore.fetcher.disk import DiskTier, Lookup
from tieredstore.fetcher.lru import MemoryLRU
from tieredstore.fetcher.readahead import ReadAheadWindow
from tieredstore.fetcher.stats import FetcherMetrics, Source
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment.layout import ChunkRef, SegmentLayout, Slice
from tieredstore.segment.path import SegmentPath
from tieredstore.segment.reader import assemble, fetch_unit

log = logging.getLogger(__name__)

MiB = 1024 * 1024

UnitKey = tuple[str, int, int]


def unit_key(unit: ChunkRef) -> UnitKey:
    """The cache key of a unit: which bytes of which object."""
    return (unit.key, unit.object_offset, unit.length)


def disk_key(key: UnitKey) -> str:
    return f"{key[0]}@{key[1]}+{key[2]}"


@dataclass(frozen=True, slots=True)
class FetcherOptions:
    """How much a :class:`Fetcher` caches, reads ahead and reads at once.

    ``memory_bytes`` bounds the memory tier; ``readahead_chunk_num`` and
    ``readahead_chunk_max`` are the read-ahead window's base and cap in units;
    ``drop_behind`` drops a unit from memory once a sequential reader has
    read through it; ``read_concurrency`` bounds GETs in flight; read-ahead
    state is kept for the ``max_segments`` most recently read segments.
    """

    memory_bytes: int = 256 * MiB
    readahead_chunk_num: int = 2
    readahead_chunk_max: int = 8
    drop_behind: bool = True
    read_concurrency: int = 16
    max_segments: int = 4096

    def __post_init__(self) -> None:
        if self.memory_bytes < 0:
            raise ConfigError("memory_cache_bytes", f"must be >= 0, got {self.memory_bytes}")
        if self.read_concurrency < 1:
            raise ConfigError("read_concurrency", f"must be >= 1, got {self.read_concurrency}")
        if not 0 <= self.readahead_chunk_num <= self.readahead_chunk_max:
            raise ConfigError(
                "readahead_chunk_num",
                f"must be in [0, readahead_chunk_max={self.readahead_chunk_max}], "
                f"got {self.readahead_chunk_num}",
            )
        if self.max_segments < 1:
            raise ConfigError("max_segments", f"must be >= 1, got {self.max_segments}")


@dataclass(slots=True, eq=False)
class _Load:
    """One unit on its way in: from disk or the store, shared by its readers."""

    path: SegmentPath
    unit: ChunkRef
    prefetch: bool  # started by read-ahead
    task: asyncio.Task[tuple[bytes, Source]] | None = None
    demanded: bool = False  # a read is waiting for it
    keep: bool = True  # False once its segment was forgotten: cache nothing


class Fetcher:
    """Memory tier, disk tier, in-flight coalescing and read-ahead over a store.

    ``options`` (:class:`FetcherOptions`) size it; keyword ``overrides`` change
    some of their fields (``Fetcher(store, memory_bytes=64 * MiB)``). ``disk`` is
    the optional disk tier (the fetcher closes it).

    Use as an async context manager, or call :meth:`close`: background loads
    are cancelled, pending disk writes finish, the disk tier is closed.
    """

    def __init__(
        self,
        store: ObjectStore,
        options: FetcherOptions | None = None,
        *,
        disk: DiskTier | None = None,
        **overrides: Any,
    ) -> None:
        options = options or FetcherOptions()
        if overrides:
            options = replace(options, **overrides)
        self.options = options
        self.store = store
        self.disk = disk
        self.metrics = FetcherMetrics()
        self.memory: MemoryLRU[UnitKey] = MemoryLRU(options.memory_bytes,
                                                    on_evict=self._evicted)
        self.readahead_chunk_num = options.readahead_chunk_num
        self.readahead_chunk_max = options.readahead_chunk_max
        self.drop_behind = options.drop_behind
        self._limit = asyncio.Semaphore(options.read_concurrency)
        # Read-ahead GETs hold at most half the permits, so a reader's own GETs
        # never queue behind a crowd of prefetches from other segments.
        self._prefetch_limit = asyncio.Semaphore(max(1, options.read_concurrency // 2))
        self._max_segments = options.max_segments
        self._inflight: dict[UnitKey, _Load] = {}
        self._prefetch_bytes = 0  # bytes of prefetch loads in flight
        self._owner: dict[UnitKey, SegmentPath] = {}  # memory-tier key -> its segment
        self._by_segment: dict[SegmentPath, set[UnitKey]] = {}  # segment -> its keys
        self._unread: set[UnitKey] = set()  # prefetched into memory, not read yet
        self._committed: set[UnitKey] = set()  # written by this process: kept for tailers
        # Per segment: units its sequential reader read last, with their ends.
        self._behind: dict[SegmentPath, list[tuple[UnitKey, int]]] = {}
        self._windows: OrderedDict[SegmentPath, ReadAheadWindow] = OrderedDict()
        self._tasks: set[asyncio.Task[Any]] = set()  # loads: cancelled on close
        self._writes: set[asyncio.Task[Any]] = set()  # disk writes: awaited on close
        self._closed = False

    # --- SegmentReader ------------------------------------------------------------

    async def read(
        self, path: SegmentPath, layout: SegmentLayout, position: int, length: int
    ) -> bytes:
        # docstring inherited
        if self._closed:
            raise StoreClosed("the fetcher is closed")
        started = time.perf_counter()
        slices = layout.slices(position, length)
        datas: list[bytes] = []
        missing: list[int] = []
        for i, piece in enumerate(slices):
            key = unit_key(piece.unit)
            data = self.memory.get(key)
            if data is None:
                self.metrics.memory_misses += 1
                missing.append(i)
                datas.append(b"")
            else:
                self.metrics.memory_hits += 1
                self._was_read(key)
                self.metrics.served(Source.MEMORY, piece.end - piece.start)
                datas.append(data)
        if missing:
            if len(missing) == 1:
                loaded = [await self._demand(path, slices[missing[0]].unit)]
            else:
                loaded = await asyncio.gather(
                    *(self._demand(path, slices[i].unit) for i in missing)
                )
            for i, (data, source) in zip(missing, loaded, strict=True):
                datas[i] = data
                self.metrics.served(source, slices[i].end - slices[i].start)
        result = assemble(slices, datas)
        if not self._closed:
            self._read_ahead(path, layout, position, length, slices)
        self.metrics.observe_read(time.perf_counter() - started)
        return result

    def committed(self, path: SegmentPath, unit: ChunkRef, data: bytes) -> None:
        # docstring inherited
        if self._closed:
            return
        if len(data) != unit.length:
            log.warning("%s: committed unit [%d, %d) came with %d bytes; not cached",
                        path, unit.position, unit.end, len(data))
            return
        self.metrics.committed_units += 1
        self.metrics.committed_bytes += len(data)
        key = unit_key(unit)
        self._remember(path, key, data, prefetched=False)
        if key in self._owner:
            self._committed.add(key)

    def forget(self, path: SegmentPath) -> None:
        # docstring inherited
        for key in self._by_segment.pop(path, ()):
            self.memory.pop(key)
            self._owner.pop(key, None)
            if key in self._unread:
                self._unread.discard(key)
                self.metrics.prefetch_waste += 1
        for key, load in list(self._inflight.items()):
            if load.path == path:
                load.keep = False
                del self._inflight[key]
                if not load.demanded and load.task is not None:
                    load.task.cancel()
        self._windows.pop(path, None)
        self._behind.pop(path, None)
        if self.disk is not None and not self._closed:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # called outside the event loop: drop them now
                self.disk.evict_now(path.base_dir)
            else:
                self._spawn_write(self._evict_disk(path))

    # --- loading ------------------------------------------------------------------

    async def _demand(self, path: SegmentPath, unit: ChunkRef) -> tuple[bytes, Source]:
        if self._closed:
            raise StoreClosed("the fetcher is closed")
        key = unit_key(unit)
        load = self._inflight.get(key)
        if load is None:
            load = self._start(path, unit, prefetch=False)
        else:
            self.metrics.coalesced_waits += 1
            if load.prefetch and not load.demanded:
                self.metrics.readahead_hits += 1
        load.demanded = True
        assert load.task is not None
        try:
            # Shielded: a reader that gives up must not cancel the load for others.
            return await asyncio.shield(load.task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if load.task.cancelled() and (current is None or not current.cancelling()):
                raise StoreClosed("the fetcher was closed during the read") from None
            raise

    def _start(self, path: SegmentPath, unit: ChunkRef, *, prefetch: bool) -> _Load:
        load = _Load(path, unit, prefetch)
        key = unit_key(unit)
        self._inflight[key] = load
        if prefetch:
            self._prefetch_bytes += unit.length
            self.metrics.prefetch_units += 1
        task = asyncio.get_running_loop().create_task(self._load(load, key))
        load.task = task
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._finished(load, key, t))
        return load

    async def _load(self, load: _Load, key: UnitKey) -> tuple[bytes, Source]:
        if self.disk is not None:
            found, data, crc = await self._disk_get(load, key)
            if found is Lookup.HIT:
                self.metrics.disk_hits += 1
                self._loaded(load, key, data)
                return data, Source.DISK
            self.metrics.disk_misses += 1
            if found is Lookup.CORRUPT:
                self.metrics.disk_corrupt += 1
                log.warning("%s: disk cache entry for %s failed its checks; refetching",
                            load.path, disk_key(key))
        if load.prefetch and not load.demanded:
            async with self._prefetch_limit, self._limit:
                data, crc = await fetch_unit(self.store, load.path, load.unit)
        else:
            async with self._limit:
                data, crc = await fetch_unit(self.store, load.path, load.unit)
        self.metrics.store_gets += 1
        self.metrics.store_bytes += len(data)
        self._loaded(load, key, data)
        if self.disk is not None and load.keep and not self._closed:
            self._spawn_write(self._write_disk(load, key, data, crc))
        return data, Source.STORE

    async def _disk_get(self, load: _Load, key: UnitKey) -> tuple[Lookup, bytes, int]:
        """A disk lookup; a failing disk tier is a miss, never a failed read."""
        assert self.disk is not None
        try:
            return await self.disk.get(disk_key(key), load.unit.length, load.unit.crc32c)
        except Exception as exc:
            self.metrics.disk_errors += 1
            log.warning("%s: disk cache lookup of %s failed: %s", load.path,
                        disk_key(key), exc)
            return Lookup.MISS, b"", 0

    def _loaded(self, load: _Load, key: UnitKey, data: bytes) -> None:
        if load.keep and not self._closed:
            self._remember(load.path, key, data,
                           prefetched=load.prefetch and not load.demanded)

    def _finished(self, load: _Load, key: UnitKey, task: asyncio.Task[tuple[bytes, Source]]
                  ) -> None:
        # Here, not in a ``finally`` of the load: a task cancelled before its
        # first step never runs its coroutine.
        self._tasks.discard(task)
        if self._inflight.get(key) is load:
            del self._inflight[key]
        if load.prefetch:
            self._prefetch_bytes -= load.unit.length
        if task.cancelled():
            return
        exc = task.exception()  # retrieved here, whoever else awaits it
        if exc is not None and not load.demanded:
            self.metrics.prefetch_errors += 1
            log.warning("%s: read-ahead of [%d, %d) from %r failed: %s", load.path,
                        load.unit.position, load.unit.end, load.unit.key, exc)

    async def _write_disk(self, load: _Load, key: UnitKey, data: bytes, crc: int) -> None:
        assert self.disk is not None
        try:
            if await self.disk.put(disk_key(key), data, crc, tag=load.path.base_dir,
                                   still_wanted=lambda: load.keep):
                self.metrics.disk_writes += 1
        except Exception as exc:
            self.metrics.disk_write_errors += 1
            log.warning("%s: disk cache write of %s failed: %s", load.path,
                        disk_key(key), exc)

    async def _evict_disk(self, path: SegmentPath) -> None:
        assert self.disk is not None
        try:
            await self.disk.evict(path.base_dir)
        except Exception as exc:
            log.warning("%s: dropping disk cache entries failed: %s", path, exc)

    def _spawn_write(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    # --- memory tier bookkeeping ----------------------------------------------------

    def _remember(self, path: SegmentPath, key: UnitKey, data: bytes, *, prefetched: bool
                  ) -> None:
        if not self.memory.put(key, data):
            self._unindex(key)
            return
        if self._owner.get(key) != path:
            self._unindex(key)
            self._owner[key] = path
            self._by_segment.setdefault(path, set()).add(key)
        if prefetched:
            self._unread.add(key)
        else:
            self._unread.discard(key)

    def _unindex(self, key: UnitKey) -> None:
        path = self._owner.pop(key, None)
        if path is not None:
            keys = self._by_segment.get(path)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_segment[path]
        self._unread.discard(key)
        self._committed.discard(key)

    def _evicted(self, key: UnitKey, data: bytes) -> None:
        if key in self._unread:
            self.metrics.prefetch_waste += 1
        self._unindex(key)

    def _was_read(self, key: UnitKey) -> None:
        if key in self._unread:
            self._unread.discard(key)
            self.metrics.readahead_hits += 1

    # --- read-ahead -------------------------------------------------------------------

    def _window(self, path: SegmentPath) -> ReadAheadWindow:
        window = self._windows.get(path)
        if window is None:
            window = ReadAheadWindow(self.readahead_chunk_num, self.readahead_chunk_max)
            self._windows[path] = window
            if len(self._windows) > self._max_segments:
                old, _ = self._windows.popitem(last=False)
                self._behind.pop(old, None)
        else:
            self._windows.move_to_end(path)
        return window

    def _read_ahead(self, path: SegmentPath, layout: SegmentLayout, position: int,
                    length: int, slices: list[Slice]) -> None:
        """Start loads for the window after this read, within the memory budget.

        The units just read, the window's units and all prefetch loads in
        flight must fit in the budget together; the window is cut where they
        would not, so inserting prefetched units evicts only older entries.
        """
        units = self._window(path).advise(layout, position, length)
        if not units:
            return
        if self.drop_behind:
            self._drop_behind(path, position, slices)
        need = sum(piece.unit.length for piece in slices)
        pending = self._prefetch_bytes
        for i, unit in enumerate(units):
            key = unit_key(unit)
            if self.memory.touch(key):
                need += unit.length
                continue
            load = self._inflight.get(key)
            if load is not None:
                if not load.prefetch:
                    need += unit.length
                continue
            if need + pending + unit.length > self.memory.budget:
                self.metrics.prefetch_skipped += len(units) - i
                return
            self._start(path, unit, prefetch=True)
            pending += unit.length

    def _drop_behind(self, path: SegmentPath, position: int, slices: list[Slice]) -> None:
        """Drop-behind: the units a sequential reader read before, and has now
        moved past (they end at or before this read's start), leave the memory
        tier at once instead of waiting for the LRU: fresh pages for every new
        unit cost more than the GET itself at catch-up speeds (BENCHMARKS.md).
        A sequential read never starts before the previous one, so it never
        needs them again. Units this process committed stay, for tailing
        readers; so does everything a random reader touches."""
        behind = self._behind.pop(path, [])
        for key, end in behind:
            if end <= position and key in self._owner and key not in self._committed:
                self.memory.pop(key)
                self._unindex(key)
                self.metrics.dropped_behind += 1
        kept = {key: end for key, end in behind if end > position}
        kept.update((unit_key(piece.unit), piece.unit.end) for piece in slices)
        self._behind[path] = list(kept.items())

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    async def wait_idle(self) -> None:
        """Wait until no load and no disk write is under way (tests, benchmarks)."""
        while self._tasks or self._writes:
            await asyncio.gather(*self._tasks, *self._writes, return_exceptions=True)

    async def close(self) -> None:
        """Cancel background loads, finish disk writes, close the disk tier."""
        if self._closed:
            return
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*self._writes, return_exceptions=True)
        self.memory.clear()
        self._owner.clear()
        self._by_segment.clear()
        self._unread.clear()
        self._committed.clear()
        self._behind.clear()
        self._windows.clear()
        if self.disk is not None:
            await self.disk.close()

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- metrics ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Counters (see :class:`FetcherMetrics`) and the memory tier's state."""
        out = self.metrics.snapshot()
        out["memory_bytes"] = self.memory.nbytes
        out["memory_budget"] = self.memory.budget
        out["memory_entries"] = len(self.memory)
        out["memory_evictions"] = self.memory.evictions
        out["memory_rejected"] = self.memory.rejected
        out["inflight_loads"] = len(self._inflight)
        out["disk_enabled"] = self.disk is not None
        return out
