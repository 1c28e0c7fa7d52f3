"""MemoryTier: the fetcher's units in memory, and everything it knows about them.

A pure structure (no IO, no asyncio), in the style of fsspec's caching
module: it holds bytes and decides what to drop; the fetcher decides what to
load. It owns every index about the units it holds, so they change together
and :meth:`MemoryTier.check` can state how they relate:

- the bytes, under a byte budget, least recently used out first
  (:class:`~tieredstore.lru.LRU`, weighing each unit by its length);
- which segment each unit belongs to, and each segment's units, so
  :meth:`~MemoryTier.forget` drops a segment at once;
- which units were prefetched and not read yet (read-ahead hits and waste);
- which units this process committed (kept for tailing readers: drop-behind
  leaves them);
- per segment, the units its sequential reader read last and where they end,
  for drop-behind. These may name units already evicted.

Methods report the events the fetcher counts (wasted prefetches, units
dropped behind, first reads of prefetched units) in their return values.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Set
from typing import Generic, TypeVar

from tieredstore.lru import LRU

K = TypeVar("K", bound=Hashable)  # a unit
P = TypeVar("P", bound=Hashable)  # a segment


class MemoryTier(Generic[K, P]):
    """Units ``K`` of segments ``P``, at most ``budget`` bytes in all."""

    __slots__ = ("_behind", "_by_segment", "_committed", "_lru", "_owner", "_unread",
                 "_wasted")

    def __init__(self, budget: int) -> None:
        self._lru: LRU[K, bytes | memoryview] = LRU(budget, weigh=len, on_evict=self._evicted)
        self._owner: dict[K, P] = {}  # unit -> its segment
        self._by_segment: dict[P, set[K]] = {}  # segment -> its units (never empty)
        self._unread: set[K] = set()  # prefetched, not read yet
        self._committed: set[K] = set()  # committed by this process
        # Per segment: units its sequential reader read last, with their ends.
        self._behind: dict[P, list[tuple[K, int]]] = {}
        self._wasted = 0  # unread units evicted by the put under way

    # --- views ---------------------------------------------------------------------

    @property
    def budget(self) -> int:
        return self._lru.budget

    @property
    def nbytes(self) -> int:
        return self._lru.used

    @property
    def evictions(self) -> int:
        return self._lru.evictions

    @property
    def rejected(self) -> int:
        """Puts of a unit larger than the whole budget (not held)."""
        return self._lru.rejected

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, key: object) -> bool:
        return key in self._lru

    def __iter__(self) -> Iterator[K]:
        """Units held, least recently used first."""
        return iter(self._lru)

    def owner(self, key: K) -> P | None:
        """The segment a held unit belongs to."""
        return self._owner.get(key)

    def units_of(self, path: P) -> frozenset[K]:
        return frozenset(self._by_segment.get(path, ()))

    @property
    def unread(self) -> Set[K]:
        """Units prefetched and not read yet (read-only view)."""
        return self._unread

    @property
    def committed(self) -> Set[K]:
        """Units this process committed (read-only view)."""
        return self._committed

    def behind(self, path: P) -> list[tuple[K, int]]:
        """Drop-behind state of ``path``: units its reader read last, with their ends."""
        return list(self._behind.get(path, ()))

    # --- reads -----------------------------------------------------------------------

    def get(self, key: K) -> tuple[bytes | memoryview, bool] | None:
        """The unit's bytes, now most recently used, and whether this is the first
        read of a prefetched unit (a read-ahead hit); None if not held."""
        data = self._lru.get(key)
        if data is None:
            return None
        if key in self._unread:
            self._unread.discard(key)
            return data, True
        return data, False

    def touch(self, key: K) -> bool:
        """Make a held unit most recently used; whether it is held."""
        return self._lru.touch(key)

    # --- writes ----------------------------------------------------------------------

    def put(self, path: P, key: K, data: bytes | memoryview, *, prefetched: bool = False,
            committed: bool = False) -> int:
        """Hold ``data`` as ``path``'s unit ``key``, evicting the least recent to fit.

        ``prefetched`` marks it unread (a read will count as a read-ahead hit);
        otherwise any unread mark goes. ``committed`` marks it as committed by
        this process; a put under another segment clears that mark. A unit
        larger than the budget is not held (and any old value goes). Returns
        how many prefetched, unread units were evicted to make room: wasted
        read-ahead.
        """
        self._wasted = 0
        if not self._lru.put(key, data):
            self._unindex(key)
            return self._wasted
        if self._owner.get(key) != path:
            self._unindex(key)
            self._owner[key] = path
            self._by_segment.setdefault(path, set()).add(key)
        if prefetched:
            self._unread.add(key)
        else:
            self._unread.discard(key)
        if committed:
            self._committed.add(key)
        return self._wasted

    def forget(self, path: P) -> int:
        """Drop every unit of ``path`` and its drop-behind state; returns how many
        were prefetched and never read (wasted read-ahead)."""
        wasted = 0
        for key in self._by_segment.pop(path, ()):
            self._lru.pop(key)
            self._owner.pop(key, None)
            self._committed.discard(key)
            if key in self._unread:
                self._unread.discard(key)
                wasted += 1
        self._behind.pop(path, None)
        return wasted

    def forget_reader(self, path: P) -> None:
        """Drop ``path``'s drop-behind state only (its reader is no longer tracked)."""
        self._behind.pop(path, None)

    def drop_behind(self, path: P, position: int, read: Iterable[tuple[K, int]]) -> int:
        """A sequential read of ``path`` at ``position`` read the units ``read``
        (unit, end). The units its previous reads read and that end at or before
        ``position`` leave memory now, unless this process committed them.
        Returns how many were dropped."""
        behind = self._behind.pop(path, [])
        dropped = 0
        for key, end in behind:
            if end <= position and key in self._owner and key not in self._committed:
                self._lru.pop(key)
                self._unindex(key)
                dropped += 1
        kept = {key: end for key, end in behind if end > position}
        kept.update(read)
        self._behind[path] = list(kept.items())
        return dropped

    def clear(self) -> None:
        self._lru.clear()
        self._owner.clear()
        self._by_segment.clear()
        self._unread.clear()
        self._committed.clear()
        self._behind.clear()

    # --- internals ---------------------------------------------------------------------

    def _unindex(self, key: K) -> None:
        path = self._owner.pop(key, None)
        if path is not None:
            keys = self._by_segment.get(path)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_segment[path]
        self._unread.discard(key)
        self._committed.discard(key)

    def _evicted(self, key: K, data: bytes | memoryview) -> None:
        if key in self._unread:
            self._wasted += 1
        self._unindex(key)

    def check(self) -> None:
        """Raise AssertionError unless the indexes agree (tests)."""
        held = set(self._lru)
        assert self._lru.used == sum(len(self._lru.peek(k) or b"") for k in held)
        assert 0 <= self._lru.used <= self._lru.budget
        assert set(self._owner) == held, "every held unit has one segment, nothing else"
        seen: set[K] = set()
        for path, keys in self._by_segment.items():
            assert keys, f"empty unit set kept for {path!r}"
            assert all(self._owner[k] == path for k in keys)
            assert not keys & seen
            seen |= keys
        assert seen == held
        assert self._unread <= held and self._committed <= held
        for path, entries in self._behind.items():
            listed = [k for k, _ in entries]
            assert len(listed) == len(set(listed)), f"{path!r} lists a unit twice"
