"""OffsetCache: where entries a reader has seen start in the data object. Pure.

PIP-17's reader keeps "the offset of some of the read entries" to enhance the
index: to read an entry in the middle of a 64 MiB block it need not scan
from the block's start again. This is that cache: entry id to byte offset,
bisected for the nearest known entry at or before the one wanted. It is
bounded: past ``capacity`` it keeps every other entry, so it stays useful
(the gap to scan at most doubles) without growing with the ledger.
"""

from __future__ import annotations

import bisect


class OffsetCache:
    """Entry id -> offset of its ``[len][entry_id]`` header in the data object."""

    __slots__ = ("_ids", "_offsets", "capacity", "hits", "misses", "thinned")

    def __init__(self, capacity: int = 1 << 16) -> None:
        if capacity < 2:
            raise ValueError(f"offset cache capacity must be >= 2, got {capacity}")
        self.capacity = capacity
        self._ids: list[int] = []
        self._offsets: list[int] = []
        self.hits = 0  # lookups that found the entry itself
        self.misses = 0
        self.thinned = 0

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, entry_id: int, offset: int) -> None:
        ids = self._ids
        if not ids or entry_id > ids[-1]:
            ids.append(entry_id)
            self._offsets.append(offset)
        else:
            i = bisect.bisect_left(ids, entry_id)
            if i < len(ids) and ids[i] == entry_id:
                return
            ids.insert(i, entry_id)
            self._offsets.insert(i, offset)
        if len(ids) > self.capacity:
            self._ids = ids[::2]
            self._offsets = self._offsets[::2]
            self.thinned += 1

    def floor(self, entry_id: int) -> tuple[int, int] | None:
        """The known entry with the largest id at or before ``entry_id``, and its offset."""
        i = bisect.bisect_right(self._ids, entry_id) - 1
        if i < 0:
            self.misses += 1
            return None
        if self._ids[i] == entry_id:
            self.hits += 1
        else:
            self.misses += 1
        return self._ids[i], self._offsets[i]
