"""A scan's messages column by column, for readers that want columns (Spark).

:class:`Columns` holds what a :class:`~tieredstore.store.scan.QueueScan`
with ``columns=True`` read, with no ``Message`` per row: the offsets and
store times as lists of ints, the bodies as views of the bytes read (joined
once, by :meth:`Columns.bodies`), and tags, keys and properties only once a
row has some. The records are the ones the scan checked (each record's
CRC32C, each unit's, unit against record), exactly as for messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat

from tieredstore.store.record import (
    NO_PROPERTIES,
    CqUnit,
    Message,
    plain_bodies,
    plain_run,
    store_times,
)


@dataclass(slots=True)
class Columns:
    """Messages of one queue, in offset order, as columns.

    ``tags``, ``keys`` and ``properties`` are None while no row has any (a
    row without: None, ``()``, an empty mapping). Bodies are views of the
    bytes the scan read (immutable: what a read returned), kept alive until
    :meth:`bodies` joins them: a batch pins the reads it came from, as a
    batch of messages holds copies of their bodies.
    """

    topic: str
    queue_id: int
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)  # store times, milliseconds
    sizes: list[int] = field(default_factory=list)  # of the bodies
    tags: list[str | None] | None = None
    keys: list[tuple[str, ...]] | None = None
    properties: list[Mapping[str, str]] | None = None
    _bodies: list[bytes | memoryview] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, message: Message) -> None:
        """One message (a record with tags, keys or properties, decoded in full)."""
        n = len(self.offsets)
        self.offsets.append(message.offset)
        self.timestamps.append(message.store_timestamp)
        self._bodies.append(message.body)
        self.sizes.append(len(message.body))
        if message.tags is not None and self.tags is None:
            self.tags = [None] * n
        if self.tags is not None:
            self.tags.append(message.tags)
        if message.keys and self.keys is None:
            self.keys = [()] * n
        if self.keys is not None:
            self.keys.append(tuple(message.keys))
        if message.properties and self.properties is None:
            self.properties = [NO_PROPERTIES] * n
        if self.properties is not None:
            self.properties.append(message.properties)

    def add_plain_run(self, view: memoryview, units: Sequence[CqUnit], start: int, stop: int,
                      *, first_offset: int, total: int, max_bytes: int) -> tuple[int, int, int]:
        """:func:`~tieredstore.store.record.decode_plain_run` into columns: the
        same records checked and taken (:func:`~tieredstore.store.record.plain_run`),
        the same result; their bodies kept as views of ``view``."""
        starts = plain_run(view, units, start, stop, first_offset=first_offset,
                           room=max_bytes - total, first=not self.offsets)
        n = len(starts) - 1
        self.offsets += range(first_offset + start, first_offset + start + n)
        self.timestamps += store_times(units, start, n)
        bodies = list(plain_bodies(view, starts))
        self._bodies += bodies
        self.sizes += map(len, bodies)
        if self.tags is not None:
            self.tags += repeat(None, n)
        if self.keys is not None:
            self.keys += repeat((), n)
        if self.properties is not None:
            self.properties += repeat(NO_PROPERTIES, n)
        return start + n, starts[-1], total + starts[-1]

    def bodies(self) -> tuple[bytes, list[int]]:
        """The bodies end to end (one copy) and where each begins, with where the
        last ends: ``len(self) + 1`` positions from 0."""
        return b"".join(self._bodies), list(accumulate(self.sizes, initial=0))

    def messages(self) -> list[Message]:
        """The rows as messages (what a scan without ``columns`` returns)."""
        data, at = self.bodies()
        n = len(self)
        return [Message(self.topic, self.queue_id, self.offsets[i], data[at[i]:at[i + 1]],
                        self.timestamps[i], self.keys[i] if self.keys else (),
                        self.tags[i] if self.tags else None,
                        self.properties[i] if self.properties else NO_PROPERTIES)
                for i in range(n)]
