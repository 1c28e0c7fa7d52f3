"""Where each byte of a segment lives: units, and the layout that seeks them.

A *unit* is a run of a segment's bytes stored contiguously in one object and
checked by one CRC32C: a chunk object before the merge, a range of the merged
``segment`` object after it. A unit is also what a reader fetches and caches:
reads are ranged GETs of whole units, so every byte returned was checked.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tieredstore.checksum import crc32c_combine


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """Segment bytes ``[position, position + length)`` at ``key[object_offset:]``.

    ``crc32c`` is None only for a chunk found by listing whose CRC has not yet
    been read (it arrives with the chunk's GET, in the object metadata).

    A *hole* (``missing``) stands for bytes no listed chunk holds, between two
    entries that are there: reading it raises, the rest of the segment reads.
    Its ``key`` is the entry after it.
    """

    position: int
    length: int
    key: str
    object_offset: int = 0
    crc32c: int | None = None
    missing: bool = False

    @property
    def end(self) -> int:
        return self.position + self.length

    @property
    def whole_object(self) -> bool:
        """Whether the unit is its object's bytes from the start (a chunk)."""
        return self.object_offset == 0


@dataclass(frozen=True, slots=True)
class Slice:
    """Bytes ``[start, end)`` of one unit, as part of a read."""

    unit: ChunkRef
    start: int
    end: int


class SegmentLayout:
    """The ordered units of a segment, contiguous from position 0."""

    __slots__ = ("_positions", "_units")

    def __init__(self, units: Iterable[ChunkRef] = ()) -> None:
        self._units: list[ChunkRef] = []
        self._positions: list[int] = []
        for unit in units:
            self.append(unit)

    @property
    def size(self) -> int:
        return self._units[-1].end if self._units else 0

    @property
    def units(self) -> Sequence[ChunkRef]:
        return tuple(self._units)

    def __len__(self) -> int:
        return len(self._units)

    def append(self, unit: ChunkRef) -> None:
        if unit.position != self.size or unit.length <= 0:
            raise ValueError(
                f"unit at {unit.position} (+{unit.length}) does not continue a layout "
                f"of {self.size} bytes"
            )
        self._units.append(unit)
        self._positions.append(unit.position)

    def replace_from(self, position: int, unit: ChunkRef
                     ) -> tuple[SegmentLayout, list[ChunkRef]]:
        """A new layout with ``unit`` (a chunk starting at ``position``, a unit
        boundary) in place of the units it covers, which are returned; units past
        ``unit``'s end stay. ``unit`` may end past this layout's size."""
        i = len(self._units) if position == self.size else self.index_of(position)
        if i < len(self._units) and self._units[i].position != position:
            raise ValueError(f"position {position} is not a unit boundary")
        dropped = [u for u in self._units[i:] if u.position < unit.end]
        kept = self._units[i + len(dropped):]
        if dropped and dropped[-1].end > unit.end:
            raise ValueError(f"unit [{unit.position}, {unit.end}) ends inside "
                             f"[{dropped[-1].position}, {dropped[-1].end})")
        return SegmentLayout([*self._units[:i], unit, *kept]), dropped

    def index_of(self, position: int) -> int:
        """Index of the unit holding ``position`` (bisect)."""
        if not 0 <= position < self.size:
            raise IndexError(f"position {position} outside [0, {self.size})")
        return bisect.bisect_right(self._positions, position) - 1

    def unit_at(self, position: int) -> ChunkRef:
        return self._units[self.index_of(position)]

    def unit_end(self, position: int) -> int:
        """The end of the unit holding ``position``; the layout's size for a
        position outside it."""
        return self.unit_at(position).end if 0 <= position < self.size else self.size

    def slices(self, position: int, length: int) -> list[Slice]:
        """The unit slices that make up ``[position, position + length)``."""
        if length <= 0:
            return []
        end = position + length
        if position < 0 or end > self.size:
            raise IndexError(f"range [{position}, {end}) outside [0, {self.size})")
        out: list[Slice] = []
        i = self.index_of(position)
        while position < end:
            unit = self._units[i]
            stop = min(end, unit.end)
            out.append(Slice(unit, position - unit.position, stop - unit.position))
            position = stop
            i += 1
        return out

    def following(self, position: int, count: int) -> list[ChunkRef]:
        """Up to ``count`` units after the one holding ``position`` (for read-ahead),
        up to the first hole."""
        if count <= 0 or not 0 <= position < self.size:
            return []
        i = self.index_of(position) + 1
        out: list[ChunkRef] = []
        for unit in self._units[i : i + count]:
            if unit.missing:
                break
            out.append(unit)
        return out

    @property
    def holes(self) -> list[ChunkRef]:
        """The units no listed chunk holds (see :class:`ChunkRef`)."""
        return [u for u in self._units if u.missing]

    def first_hole_from(self, position: int) -> ChunkRef | None:
        """The first hole at or after ``position`` (a unit boundary), if any."""
        if position >= self.size:
            return None
        return next((u for u in self._units[self.index_of(position):] if u.missing), None)

    def with_crc(self, index: int, crc: int) -> None:
        """Record a CRC learnt from a GET or HEAD of a listed chunk."""
        unit = self._units[index]
        self._units[index] = ChunkRef(unit.position, unit.length, unit.key, unit.object_offset,
                                      crc, unit.missing)


def keep_best(best: dict[int, ChunkRef], unit: ChunkRef) -> None:
    """Keep ``unit`` in ``best`` (borrowed units by position: bytes held in other
    objects) if it is the one to read at its position: the longest, of equal ones
    the newest object's (their keys sort in the order they were written). A unit
    rewritten from smaller ones covers them, which then lie within it."""
    other = best.get(unit.position)
    if other is None or (other.end, other.key) < (unit.end, unit.key):
        best[unit.position] = unit


def continue_with(layout: SegmentLayout, units: Sequence[ChunkRef], *,
                  sealed: bool = False,
                  hole_key: Callable[[int], str] | None = None) -> list[ChunkRef]:
    """Append to ``layout`` (its chunks) the ``units`` held elsewhere (borrowed)
    that lie past its end, in order; return those that lie within it (their
    bytes are in the chunks already, or in a longer unit taken before). A unit
    that neither continues the layout nor lies within it, or any past the end of
    a ``sealed`` segment (a seal takes every borrowed unit into chunks first), raises
    ``ValueError`` naming it.

    With ``hole_key`` (an open segment), bytes no unit holds before a later
    unit (the last chunks, or an object lent from, gone from the bucket) become a
    hole of ``layout``, keyed ``hole_key(position of its end)``, where the
    chunk series goes on, and the units after it continue the layout."""
    if sealed and any(u.end > layout.size for u in units):
        raise ValueError(f"borrowed units past the end of a sealed segment "
                         f"({layout.size} bytes)")
    # From the end on, at each position the unit :func:`keep_best` keeps. A unit
    # that starts before the end and reaches past it (a rewritten one whose
    # start moved into a chunk meanwhile) is not needed when other units
    # continue the end.
    best: dict[int, ChunkRef] = {}
    for unit in units:
        keep_best(best, unit)
    taken: set[int] = set()
    while True:
        while (step := best.get(layout.size)) is not None:
            layout.append(step)
            taken.add(id(step))
        end = layout.size
        ahead = [u.position for u in units if u.position > end]
        if (hole_key is None or sealed or not ahead
                or any(u.position < end < u.end for u in units if id(u) not in taken)):
            break
        resume = min(ahead)
        layout.append(ChunkRef(end, resume - end, hole_key(resume), missing=True))
    rest = [u for u in units if id(u) not in taken]
    beyond = [u for u in rest if u.end > layout.size]
    if beyond:
        first = min(beyond, key=lambda u: u.position)
        raise ValueError(f"unit [{first.position}, {first.end}) in {first.key!r} does not "
                         f"continue the segment's {layout.size} bytes")
    return rest


def coalesce_units(
    chunks: Sequence[tuple[int, int]], key: str, target: int
) -> list[ChunkRef]:
    """Units of a merged object from its chunks' (length, crc32c), in order.

    Neighbours are joined while the unit stays within ``target`` bytes; a
    chunk larger than ``target`` stays a unit of its own. The joined CRC comes
    from :func:`crc32c_combine`, so no byte is read again.
    """
    units: list[ChunkRef] = []
    start = length = crc = 0
    position = 0
    for chunk_length, chunk_crc in chunks:
        if length and length + chunk_length > target:
            units.append(ChunkRef(start, length, key, start, crc))
            length = crc = 0
        if not length:
            start = position
            crc = chunk_crc
        else:
            crc = crc32c_combine(crc, chunk_crc, chunk_length)
        length += chunk_length
        position += chunk_length
    if length:
        units.append(ChunkRef(start, length, key, start, crc))
    return units
