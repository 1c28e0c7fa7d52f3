"""LogHold: the bytes of landed log pieces kept in memory until they move into chunks.

A busy segment's pieces become a chunk within seconds (a full chunk of them,
or its seal): built from these bytes, that chunk reads nothing back from the
log objects. A quiet segment's pieces go into a consolidated log object, and
its compaction, an hour later, reads them back with one ranged GET per
consolidated object and group of queues: their bytes are let go once
consolidated (:meth:`LogHold.forget`), so quiet queues do not fill the budget.

Bounded by ``budget`` bytes: a piece that would pass it is not kept, and
its chunk reads that piece back (ranged GET, CRC-checked).
"""

from __future__ import annotations

from tieredstore.log.consolidate import SegmentKey


class LogHold:
    """Bytes of log pieces by segment and position, at most ``budget`` in all."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.bytes = 0
        self._data: dict[SegmentKey, dict[int, bytes]] = {}

    def keep(self, key: SegmentKey, position: int, data: bytes) -> None:
        held = self._data.setdefault(key, {})
        old = held.pop(position, None)
        if old is not None:
            self.bytes -= len(old)
        if self.bytes + len(data) > self.budget:
            if not held:
                del self._data[key]
            return
        held[position] = data
        self.bytes += len(data)

    def forget(self, key: SegmentKey, start: int = 0, end: int | None = None) -> None:
        """Let go of the pieces of ``key`` starting in ``[start, end)`` (all: no end)."""
        held = self._data.get(key)
        if held is None:
            return
        for position in [p for p in held if p >= start and (end is None or p < end)]:
            self.bytes -= len(held.pop(position))
        if not held:
            del self._data[key]

    def read(self, key: SegmentKey, start: int, end: int) -> list[tuple[int, int, bytes | None]]:
        """``[start, end)`` of ``key`` as spans ``(start, end, bytes)`` in order: the
        bytes held, or None for a run of pieces not held."""
        held = self._data.get(key, {})
        spans: list[tuple[int, int, bytes | None]] = []
        position, gap = start, None
        while position < end:
            data = held.get(position)
            if data is None or position + len(data) > end:
                if gap is None:
                    gap = position
                following = [p for p in held if position < p < end]
                position = min(following, default=end)
                continue
            if gap is not None:
                spans.append((gap, position, None))
                gap = None
            spans.append((position, position + len(data), data))
            position += len(data)
        if gap is not None:
            spans.append((gap, end, None))
        return spans
