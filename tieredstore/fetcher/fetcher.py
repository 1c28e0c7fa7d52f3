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
waits on the object store. The fetcher only orchestrates the parts the
package lists (:mod:`tieredstore.fetcher`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from tieredstore.errors import StoreClosed
from tieredstore.fetcher.carry import carry_units
from tieredstore.fetcher.disk import DiskTier, Lookup
from tieredstore.fetcher.generations import DiskGenerations
from tieredstore.fetcher.keys import UnitKey, disk_key, unit_key
from tieredstore.fetcher.loads import Load, Loaded, LoadRegistry
from tieredstore.fetcher.memory import MemoryTier
from tieredstore.fetcher.options import FetcherOptions
from tieredstore.fetcher.readahead import ReadAheadWindows
from tieredstore.fetcher.stats import FetcherMetrics, Source
from tieredstore.objectstore.base import ObjectStore
from tieredstore.segment.layout import ChunkRef, SegmentLayout, Slice
from tieredstore.segment.path import SegmentPath
from tieredstore.segment.reader import assemble, fetch_span, fetch_unit
from tieredstore.sizes import MiB

__all__ = ["Fetcher", "FetcherOptions", "MiB", "UnitKey", "disk_key", "unit_key"]

log = logging.getLogger(__name__)
# A reader served from memory yields to the loop at most this often (seconds)
# while loads are in flight, so they progress (see Fetcher.read).
YIELD_EVERY = 0.002


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
        self.disk = disk  # None once it failed (see _drop_disk)
        self._dropped_disk: DiskTier | None = None
        self.metrics = FetcherMetrics()
        self.memory: MemoryTier[UnitKey, SegmentPath] = MemoryTier(options.memory_bytes)
        self._yielded = 0.0  # when a read last let loads in flight move on
        # The read-ahead the last read saw through whole: (segment, first unit,
        # units); a read that asks for the same one has nothing to start.
        self._planned: tuple[SegmentPath, int, int] | None = None
        self.loads = LoadRegistry(self._load, concurrency=options.read_concurrency,
                                  metrics=self.metrics)
        # Which disk work predates a forget() of its segment (see _load, forget).
        self.generations: DiskGenerations[SegmentPath] = DiskGenerations()
        # A segment whose read-ahead state goes loses its drop-behind state too.
        self.windows: ReadAheadWindows[SegmentPath] = ReadAheadWindows(
            options.readahead_chunk_num, options.readahead_chunk_max, options.max_segments,
            on_evict=self.memory.forget_reader)

    # --- SegmentReader ------------------------------------------------------------

    async def read(
        self, path: SegmentPath, layout: SegmentLayout, position: int, length: int
    ) -> bytes | memoryview:
        # docstring inherited
        self._check_open()
        started = time.perf_counter()
        slices = layout.slices(position, length)
        datas: list[bytes | memoryview] = []
        missing: list[int] = []
        for i, piece in enumerate(slices):
            found = self.memory.get(unit_key(piece.unit))
            if found is None:
                self.metrics.memory_misses += 1
                missing.append(i)
                datas.append(b"")
            else:
                self.metrics.memory_hits += 1
                if found[1]:
                    self.metrics.readahead_hits += 1
                self.metrics.served(Source.MEMORY, piece.end - piece.start, path.topic)
                datas.append(found[0])
        waits = [self.loads.demand(path, slices[i].unit) for i in missing]
        # The read-ahead's GETs go out with the demanded ones, not after them.
        self._read_ahead(path, layout, position, length, slices)
        if waits:
            loaded = [await waits[0]] if len(waits) == 1 else await asyncio.gather(*waits)
            for i, (data, source) in zip(missing, loaded, strict=True):
                datas[i] = data
                self.metrics.served(source, slices[i].end - slices[i].start, path.topic)
        result = assemble(slices, datas)
        if not self.loads.closed and self.loads and started - self._yielded >= YIELD_EVERY:
            # Let loads in flight move on: a reader served from memory never
            # waits on the loop otherwise, so its read-ahead would neither
            # send its GETs nor take in their bytes until it needs them.
            # (At most every YIELD_EVERY: each yield costs a loop turn.)
            self._yielded = started
            await asyncio.sleep(0)
        self.metrics.observe_read(time.perf_counter() - started)
        return result

    async def read_span(
        self, path: SegmentPath, layout: SegmentLayout, position: int, length: int
    ) -> bytes:
        # docstring inherited
        self._check_open()
        out: list[bytes | memoryview] = []
        for piece in layout.slices(position, length):
            found = self.memory.get(unit_key(piece.unit))
            if found is not None:
                out.append(found[0][piece.start:piece.end])
                self.metrics.served(Source.MEMORY, piece.end - piece.start, path.topic)
                continue
            data = await fetch_span(self.store, path, piece)
            self.metrics.span_gets += 1
            self.metrics.served(Source.STORE, len(data), path.topic)
            out.append(data)
        return b"".join(out)

    def _check_open(self) -> None:
        if self.loads.closed:
            raise StoreClosed("the fetcher is closed")

    def committed(self, path: SegmentPath, unit: ChunkRef, data: bytes | memoryview) -> None:
        # docstring inherited
        if self.loads.closed:
            return
        if len(data) != unit.length:
            log.warning("%s: committed unit [%d, %d) came with %d bytes; not cached",
                        path, unit.position, unit.end, len(data))
            return
        self.metrics.committed_units += 1
        self.metrics.committed_bytes += len(data)
        self.metrics.prefetch_waste += self.memory.put(path, unit_key(unit), data,
                                                       committed=True)

    def forget(self, path: SegmentPath) -> None:
        # docstring inherited
        # Disk: the writes of ``path`` under way go stale (each deletes what it
        # stored), and until they and the eviction are done no load reads the
        # disk for ``path``: nothing stored before this call is served after it.
        self.metrics.prefetch_waste += self.memory.forget(path)
        self.loads.forget(path)
        self.windows.forget(path)
        self._planned = None
        if self.disk is not None and not self.loads.closed:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # called outside the event loop: drop them now
                self.generations.forget(path, evicting=False)
                try:
                    self.disk.evict_now(path.base_dir)
                except Exception as exc:
                    self._drop_disk(f"dropping the entries of {path}", exc)
            else:
                self.generations.forget(path, evicting=True)
                self.loads.background.spawn(self._evict_disk(path), f"evict {path} from disk")

    def replaced(self, path: SegmentPath, old: SegmentLayout, new: SegmentLayout) -> None:
        # docstring inherited
        carried = carry_units(self.memory, old, new) if not self.loads.closed else []
        self.forget(path)
        for unit, data, committed in carried:
            self.metrics.prefetch_waste += self.memory.put(path, unit_key(unit), data,
                                                           committed=committed)
        self.metrics.carried_units += len(carried)

    # --- loading: the disk tier, then the store ---------------------------------------

    async def _load(self, load: Load) -> Loaded:
        """Run by the registry, once per load: disk first, then one GET."""
        # An unsettled segment's disk entries may predate its last forget():
        # not read (a miss), the unit comes from the store.
        if self.disk is not None and not self.generations.settled(load.path):
            self.metrics.disk_misses += 1
        elif self.disk is not None:
            found, data, crc = await self._disk_get(load)
            if found is Lookup.HIT:
                self.metrics.disk_hits += 1
                self._loaded(load, data)
                return data, Source.DISK
            self.metrics.disk_misses += 1
            if found is Lookup.CORRUPT:
                self.metrics.disk_corrupt += 1
                log.warning("%s: disk cache entry for %s failed its checks; refetching",
                            load.path, disk_key(load.key))
        data, crc = await self.loads.limited(
            load, lambda: fetch_unit(self.store, load.path, load.unit))
        self.metrics.store_gets += 1
        self.metrics.store_bytes += len(data)
        self._loaded(load, data)
        if self.disk is not None and load.keep and not self.loads.closed:
            # Taken now, not when the write task first runs: a forget in between
            # must find it.
            generation = self.generations.begin_write(load.path)
            self.loads.background.spawn(self._write_disk(load, data, crc, generation),
                                        f"write {load.unit.key} to disk")
        return data, Source.STORE

    def _loaded(self, load: Load, data: bytes | memoryview) -> None:
        if load.keep and not self.loads.closed:
            self.metrics.prefetch_waste += self.memory.put(
                load.path, load.key, data, prefetched=load.speculative)

    async def _disk_get(self, load: Load) -> tuple[Lookup, bytes | memoryview, int]:
        """A disk lookup; a failing disk tier is a miss, never a failed read."""
        disk = self.disk
        if disk is None:  # dropped meanwhile
            return Lookup.MISS, b"", 0
        try:
            return await disk.get(disk_key(load.key), load.unit.length, load.unit.crc32c)
        except Exception as exc:
            self.metrics.disk_errors += 1
            self._drop_disk(f"{load.path}: looking up {disk_key(load.key)}", exc)
            return Lookup.MISS, b"", 0

    async def _write_disk(self, load: Load, data: bytes | memoryview, crc: int,
                          generation: int) -> None:
        """Store a loaded unit; if its segment was forgotten meanwhile, delete it
        again before this write counts as done (:class:`DiskGenerations`)."""
        path, key = load.path, disk_key(load.key)
        generations = self.generations
        disk = self.disk
        try:
            if disk is None:  # dropped meanwhile
                return
            stored = await disk.put(
                key, data, crc, tag=path.base_dir,
                still_wanted=lambda: load.keep and generations.current(path) == generation)
            if stored:
                self.metrics.disk_writes += 1
                if generations.stale(path, generation):
                    await disk.delete(key)
        except Exception as exc:
            self.metrics.disk_write_errors += 1
            self._drop_disk(f"{path}: storing {key}", exc)
        finally:
            generations.end_write(path, generation)

    async def _evict_disk(self, path: SegmentPath) -> None:
        disk = self.disk
        try:
            if disk is not None:  # else dropped meanwhile: no read sees its entries
                await disk.evict(path.base_dir)
        except Exception as exc:
            self._drop_disk(f"dropping the entries of {path}", exc)
        finally:
            self.generations.end_eviction(path)

    def _drop_disk(self, what: str, error: Exception) -> None:
        """A disk tier that failed (a full disk, say) is dropped: from now on this
        fetcher reads from memory and the store only, and never fails a read for
        it. Its entries stay on disk and are checked when read again (after a
        restart), as after a crash; :meth:`close` closes it."""
        disk, self.disk = self.disk, None
        if disk is None:
            return
        self._dropped_disk = disk
        log.warning("the disk cache in %r failed (%s: %s); reading from memory and the "
                    "store only from now on", disk.directory, what, error)

    # --- read-ahead ---------------------------------------------------------------------

    def _read_ahead(self, path: SegmentPath, layout: SegmentLayout, position: int,
                    length: int, slices: list[Slice]) -> None:
        """Start loads for the window after this read, within the memory budget.

        The units just read, the window's units and all prefetch loads in
        flight must fit in the budget together; the window is cut where they
        would not, so inserting prefetched units evicts only older entries.

        Drop-behind (see :meth:`MemoryTier.drop_behind`): the units a
        sequential reader read before, and has now moved past, leave the
        memory tier at once instead of waiting for the LRU: fresh pages for
        every new unit cost more than the GET itself at catch-up speeds
        (BENCHMARKS.md). A sequential read never starts before the previous
        one, so it never needs them again. Units this process committed stay,
        for tailing readers; so does everything a random reader touches.
        """
        units = self.windows.advise(path, layout, position, length)
        plan = (path, units[0].position, len(units)) if units else None
        if plan is not None and plan == self._planned:
            # The reader is still in the unit of its last read (1 MiB reads of
            # 4 MiB units: 3 reads in 4): that read dropped what lay behind and
            # started or found every unit of this same window.
            return
        self._planned = None
        if plan is None:
            return
        if self.options.drop_behind:
            self.metrics.dropped_behind += self.memory.drop_behind(
                path, position, [(unit_key(piece.unit), piece.unit.end) for piece in slices])
        need = sum(piece.unit.length for piece in slices)
        pending = self.loads.prefetch_bytes
        for i, unit in enumerate(units):
            key = unit_key(unit)
            if self.memory.touch(key):
                need += unit.length
                continue
            load = self.loads.get(key)
            if load is not None:
                if not load.prefetch:
                    need += unit.length
                continue
            if need + pending + unit.length > self.memory.budget:
                self.metrics.prefetch_skipped += len(units) - i
                return  # the next read tries again
            self.loads.start(path, unit, prefetch=True)
            pending += unit.length
        self._planned = plan

    # --- lifecycle ----------------------------------------------------------------------

    async def wait_idle(self) -> bool:
        """Wait until no load and no disk write is under way (tests, benchmarks);
        whether any was."""
        return await self.loads.background.wait_idle()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran (reads then raise ``StoreClosed``)."""
        return self.loads.closed

    async def close(self) -> None:
        """Cancel background loads, finish disk writes, close the disk tier."""
        if self.loads.closed:
            return
        await self.loads.close()
        self.memory.clear()
        self.windows.clear()
        self._planned = None
        for disk in (self.disk, self._dropped_disk):
            if disk is not None:
                await disk.close()

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
        out["inflight_loads"] = len(self.loads)
        out["disk_enabled"] = self.disk is not None
        return out
