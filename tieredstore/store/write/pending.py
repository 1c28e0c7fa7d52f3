"""PendingUnits: a queue's consume-queue units waiting for their commit-log bytes.

A message's unit is known once its record is appended, but goes to the
consume queue only when the commit-log bytes it points to are committed
(dispatch, see :mod:`tieredstore.store.write.queue`). Until then it waits here, where
reads and key lookups find it too.

Kept as columns of 64-bit integers (``array``), not a tuple per message: a
batch of bare bodies adds its units with a few C calls, and the garbage
collector has no object per message to walk (as tuples, its passes tripled
the cost of keeping them). Offsets are consecutive from ``first``; units
point at ever later commit-log bytes, so those ready to dispatch are a prefix
found by bisection.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import repeat
from typing import NamedTuple

from tieredstore.store.formats.record import UNIT_SIZE, CqUnit, encode_units


class Pending(NamedTuple):
    """A message whose unit waits for its commit-log bytes to be committed."""

    offset: int
    unit: CqUnit
    keys: Sequence[str] = ()


class PendingUnits:
    """The units of offsets ``[first, first + len)``, in order."""

    __slots__ = ("_hashes", "_keys", "_positions", "_sizes", "_stamps", "first")

    def __init__(self) -> None:
        self.first = 0  # the first unit's offset (meaningless while empty)
        self._positions = array("q")
        self._sizes = array("q")
        self._hashes = array("q")
        self._stamps = array("q")
        self._keys: dict[int, Sequence[str]] = {}  # offsets with index keys: their keys

    def __len__(self) -> int:
        return len(self._positions)

    def _follows(self, offset: int) -> None:
        if not self._positions:
            self.first = offset
        elif offset != self.first + len(self._positions):
            raise ValueError(f"the unit of offset {offset} does not follow offset "
                             f"{self.first + len(self._positions) - 1}")

    def add(self, offset: int, unit: CqUnit, keys: Sequence[str] = ()) -> None:
        """The unit of the message after the last (``keys``: what indexes it)."""
        self._follows(offset)
        self._positions.append(unit.position)
        self._sizes.append(unit.size)
        self._hashes.append(unit.tags_hash)
        self._stamps.append(unit.store_timestamp)
        if keys:
            self._keys[offset] = keys

    def add_bare(self, first: int, positions: Sequence[int], sizes: Sequence[int],
                 stamps: Sequence[int]) -> None:
        """Units of the messages from ``first`` on, none with tags or keys."""
        self._follows(first)
        n = len(positions)
        self._positions.extend(positions)
        self._sizes.extend(sizes[:n])
        self._hashes.frombytes(bytes(8 * n))
        self._stamps.extend(stamps[:n])

    def first_end(self) -> int | None:
        """Where the first unit's record ends in the commit log (None: empty)."""
        return self._positions[0] + self._sizes[0] if self._positions else None

    def ready(self, committed: int) -> int:
        """How many units, from the first, point at records wholly below ``committed``."""
        positions, sizes = self._positions, self._sizes
        low, high = 0, len(positions)
        while low < high:
            mid = (low + high) // 2
            if positions[mid] + sizes[mid] <= committed:
                low = mid + 1
            else:
                high = mid
        return low

    def encode(self, n: int) -> bytes:
        """The first ``n`` units in the consume queue's bytes."""
        return encode_units(self._units(0, n))

    def stamps(self, n: int) -> list[int]:
        return self._stamps[:n].tolist()

    def keyed_within(self, n: int) -> bool:
        """Whether any of the first ``n`` messages has index keys."""
        end = self.first + n
        return any(offset < end for offset in self._keys)

    def messages(self, n: int) -> list[Pending]:
        """The first ``n`` as (offset, unit, keys)."""
        new, keys = tuple.__new__, self._keys
        offsets = range(self.first, self.first + n)
        return [new(Pending, (offset, unit, keys.get(offset, ())))
                for offset, unit in zip(offsets, self._units(0, n), strict=True)]

    def drop(self, n: int) -> None:
        """Forget the first ``n`` (dispatched)."""
        for column in (self._positions, self._sizes, self._hashes, self._stamps):
            del column[:n]
        end = self.first + n
        for offset in [o for o in self._keys if o < end]:
            del self._keys[offset]
        self.first = end

    def units(self, start: int, end: int) -> list[CqUnit]:
        """The units of offsets ``[start, end)`` held here."""
        return list(self._units(max(start - self.first, 0),
                                max(min(end - self.first, len(self)), 0)))

    def _units(self, begin: int, end: int) -> map[CqUnit]:
        new = tuple.__new__  # CqUnit(...), built in C
        columns = (self._positions[begin:end], self._sizes[begin:end],
                   self._hashes[begin:end], self._stamps[begin:end])
        return map(new, repeat(CqUnit), zip(*columns, strict=True))

    def keyed(self) -> list[Pending]:
        """The messages with index keys, in offset order."""
        return [Pending(offset, next(self._units(offset - self.first,
                                                 offset - self.first + 1)), keys)
                for offset, keys in sorted(self._keys.items())]

    def bytes_held(self) -> int:
        """The consume-queue bytes these units will take."""
        return len(self) * UNIT_SIZE
