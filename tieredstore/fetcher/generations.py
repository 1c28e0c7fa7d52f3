"""DiskGenerations: which disk work of a segment predates its last ``forget``.

Forgetting a segment drops its units from the disk tier (one eviction by
tag), but disk work already under way can outlast that eviction: the write
of a unit loaded just before the forget may land after it. A write that does
must not leave the unit behind, and no read may see it in the meantime.

So each segment has a generation that :meth:`DiskGenerations.forget` bumps. A
disk write takes its segment's generation when it starts
(:meth:`~DiskGenerations.begin_write`); when it is done, a write whose
generation is no longer current is *stale* and deletes what it stored before
it ends (:meth:`~DiskGenerations.end_write`). A segment is *unsettled* while
the eviction of a forget, or a stale write, is still under way: its disk
entries may be older than the forget, and a load must not read them (it goes
to the store instead). Once settled, nothing on disk predates the last forget.

A segment's record lives only while some of its disk work is under way, so
the bookkeeping is bounded by the work in flight, not by the segments ever
seen. Generations are compared only among work of one record's lifetime.
Pure: no IO, no event loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

P = TypeVar("P", bound=Hashable)


@dataclass(slots=True)
class _Record:
    generation: int = 0
    writes: Counter[int] = field(default_factory=Counter)  # in flight, by generation
    evictions: int = 0  # forget evictions in flight

    @property
    def idle(self) -> bool:
        return not self.writes and not self.evictions

    @property
    def settled(self) -> bool:
        return not self.evictions and all(g == self.generation for g in self.writes)


class DiskGenerations(Generic[P]):
    """Per-segment generations of disk work, kept while that work is in flight."""

    def __init__(self) -> None:
        self._records: dict[P, _Record] = {}

    def __len__(self) -> int:
        """Segments with disk work under way."""
        return len(self._records)

    def current(self, path: P) -> int:
        """The generation of ``path`` now (0 if it has no disk work under way)."""
        record = self._records.get(path)
        return 0 if record is None else record.generation

    def settled(self, path: P) -> bool:
        """Whether the disk tier holds nothing of ``path`` older than its last forget
        (no forget eviction and no stale write of it is under way)."""
        record = self._records.get(path)
        return record is None or record.settled

    def forget(self, path: P, *, evicting: bool) -> None:
        """``path`` was forgotten: the writes under way are stale from now on.

        ``evicting``: an eviction of its disk entries was started, to be ended
        with :meth:`end_eviction`; until then the segment is unsettled.
        """
        record = self._records.get(path)
        if record is None:
            if not evicting:
                return  # no disk work under way: nothing to mark
            record = self._records[path] = _Record()
        record.generation += 1
        if evicting:
            record.evictions += 1

    def end_eviction(self, path: P) -> None:
        """The eviction started by a :meth:`forget` of ``path`` is over."""
        record = self._records[path]
        record.evictions -= 1
        self._drop_if_idle(path, record)

    def begin_write(self, path: P) -> int:
        """A disk write of ``path`` starts: its generation, for :meth:`stale`."""
        record = self._records.get(path)
        if record is None:
            record = self._records[path] = _Record()
        record.writes[record.generation] += 1
        return record.generation

    def stale(self, path: P, generation: int) -> bool:
        """Whether ``path`` was forgotten since a write of ``generation`` began
        (the write is under way: its record is alive)."""
        return self._records[path].generation != generation

    def end_write(self, path: P, generation: int) -> None:
        """A write begun at ``generation`` is over (a stale one: its entry deleted)."""
        record = self._records[path]
        record.writes[generation] -= 1
        if not record.writes[generation]:
            del record.writes[generation]
        self._drop_if_idle(path, record)

    def _drop_if_idle(self, path: P, record: _Record) -> None:
        if record.idle:
            del self._records[path]
