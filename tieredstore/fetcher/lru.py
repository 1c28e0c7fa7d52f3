"""MemoryLRU: byte values under a byte budget, least recently used out first.

A pure policy (fsspec's caching style): it holds bytes and decides what to
drop, and does no IO itself. :meth:`MemoryLRU.fetch` takes the function that
produces a missing value, so the policy is tested with a counting fake.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class MemoryLRU(Generic[K]):
    """Values keyed by ``K``, at most ``budget`` bytes in all.

    The budget counts value bytes, not entries. A value larger than the whole
    budget is not cached (``rejected`` counts them). ``on_evict`` is called
    with each entry dropped to make room (not with entries removed by
    :meth:`pop` or replaced by :meth:`put`).
    """

    __slots__ = ("_entries", "_on_evict", "budget", "evicted_bytes", "evictions", "hits",
                 "misses", "nbytes", "rejected")

    def __init__(self, budget: int, *, on_evict: Callable[[K, bytes], None] | None = None) -> None:
        if budget < 0:
            raise ValueError(f"budget must be >= 0 bytes, got {budget}")
        self.budget = budget
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.evicted_bytes = 0
        self.rejected = 0
        self._entries: OrderedDict[K, bytes] = OrderedDict()
        self._on_evict = on_evict

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """Keys, least recently used first."""
        return iter(list(self._entries))

    @property
    def free(self) -> int:
        return self.budget - self.nbytes

    def get(self, key: K) -> bytes | None:
        """The value, now most recently used; counts a hit or a miss."""
        data = self._entries.get(key)
        if data is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return data

    def peek(self, key: K) -> bytes | None:
        """The value without counting or changing its recency."""
        return self._entries.get(key)

    def touch(self, key: K) -> bool:
        """Make ``key`` most recently used, if held. No counting."""
        if key not in self._entries:
            return False
        self._entries.move_to_end(key)
        return True

    def put(self, key: K, data: bytes) -> bool:
        """Hold ``data`` as most recently used, evicting the least recent to fit.

        Returns False (and holds nothing under ``key``) if ``data`` alone is
        larger than the budget.
        """
        size = len(data)
        old = self._entries.pop(key, None)
        if old is not None:
            self.nbytes -= len(old)
        if size > self.budget:
            self.rejected += 1
            return False
        while self.nbytes + size > self.budget:
            victim, victim_data = self._entries.popitem(last=False)
            self.nbytes -= len(victim_data)
            self.evictions += 1
            self.evicted_bytes += len(victim_data)
            if self._on_evict is not None:
                self._on_evict(victim, victim_data)
        self._entries[key] = data
        self.nbytes += size
        return True

    def pop(self, key: K) -> bytes | None:
        """Drop ``key`` (not counted as an eviction); its value, if it was held."""
        data = self._entries.pop(key, None)
        if data is not None:
            self.nbytes -= len(data)
        return data

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def fetch(self, key: K, fetcher: Callable[[K], bytes]) -> bytes:
        """The cached value, or ``fetcher(key)`` cached on the way out."""
        data = self.get(key)
        if data is None:
            data = fetcher(key)
            self.put(key, data)
        return data

    def stats(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "evicted_bytes": self.evicted_bytes,
            "rejected": self.rejected,
            "entries": len(self._entries),
            "bytes": self.nbytes,
            "budget": self.budget,
        }
