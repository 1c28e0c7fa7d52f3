"""ReadAheadWindow: how many units to prefetch after a read of one segment.

A pure policy: it watches the reads of one segment and names the units worth
fetching next; the fetcher does the fetching (and may fetch fewer, to stay in
its memory budget). The rules, after RocketMQ's S3 design (read-ahead of the
next ``readahead_chunk_num`` chunks):

- A read is *sequential* if it starts after the start of the previous read
  and no later than its end (``last_start < position <= last_end``): a
  reader that re-reads a partial message at the end of its last batch is
  still reading forward.
- The first sequential read opens the window at ``base`` units; each later
  sequential read that reaches a unit it had not reached before grows it by
  one, up to ``cap``.
- A read at the same start as the previous one (a retry, or a second reader
  of the same record) leaves the window as it is.
- Any other read is a jump: the window closes (0 units), and random readers
  fetch only what they ask for. The next sequential read reopens it at
  ``base``.
- The first read of a segment counts as sequential if it starts at position
  0 (a catch-up reader starting from the beginning), as a jump otherwise.

The units named are always taken from the layout, which holds committed
units only, so read-ahead never reaches data not yet committed.

:class:`ReadAheadWindows` keeps one window per segment, for the most
recently read segments only.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from tieredstore.lru import LRU
from tieredstore.segment.layout import ChunkRef, SegmentLayout

P = TypeVar("P", bound=Hashable)


class ReadAheadWindow:
    """Read-ahead state of one segment."""

    __slots__ = ("_last_unit", "base", "cap", "jumps", "last_end", "last_start",
                 "sequential_reads", "window")

    def __init__(self, base: int, cap: int) -> None:
        if not 0 <= base <= cap:
            raise ValueError(f"need 0 <= base <= cap, got base={base} cap={cap}")
        self.base = base
        self.cap = cap
        self.window = 0
        self.last_start: int | None = None
        self.last_end: int | None = None
        self._last_unit = -1
        self.sequential_reads = 0
        self.jumps = 0

    def is_sequential(self, position: int) -> bool:
        """Whether a read at ``position`` continues the previous one."""
        if self.last_start is None or self.last_end is None:
            return position == 0
        return self.last_start < position <= self.last_end

    def advise(self, layout: SegmentLayout, position: int, length: int) -> list[ChunkRef]:
        """Record a read of ``[position, position + length)``; the units to prefetch.

        Those are up to ``window`` units after the one holding the read's last
        byte, fewer near the end of the layout.
        """
        if length <= 0:
            return []
        end = position + length
        last_unit = layout.index_of(end - 1)
        if position == self.last_start:  # a repeat: neither growth nor a jump
            last_unit = max(last_unit, self._last_unit)
        elif self.is_sequential(position):
            self.sequential_reads += 1
            if self.window == 0:
                self.window = self.base
            elif last_unit > self._last_unit:
                self.window = min(self.cap, self.window + 1)
        else:
            self.jumps += 1
            self.window = 0
        self.last_start, self.last_end = position, end
        self._last_unit = last_unit
        return layout.following(end - 1, self.window)


class ReadAheadWindows(Generic[P]):
    """A :class:`ReadAheadWindow` per segment ``P``, for the ``max_segments`` most
    recently read; ``on_evict`` is called with each segment whose window is
    dropped to make room (so state kept beside the window can go too)."""

    __slots__ = ("_windows", "base", "cap")

    def __init__(self, base: int, cap: int, max_segments: int, *,
                 on_evict: Callable[[P], None] | None = None) -> None:
        self.base = base
        self.cap = cap
        self._windows: LRU[P, ReadAheadWindow] = LRU(
            max_segments, on_evict=None if on_evict is None else lambda path, _: on_evict(path))

    def __len__(self) -> int:
        return len(self._windows)

    def __contains__(self, path: object) -> bool:
        return path in self._windows

    def advise(self, path: P, layout: SegmentLayout, position: int, length: int
               ) -> list[ChunkRef]:
        """:meth:`ReadAheadWindow.advise` on ``path``'s window (opened if new)."""
        window = self._windows.get(path)
        if window is None:
            window = ReadAheadWindow(self.base, self.cap)
            self._windows.put(path, window)
        return window.advise(layout, position, length)

    def forget(self, path: P) -> None:
        self._windows.pop(path)

    def clear(self) -> None:
        self._windows.clear()
