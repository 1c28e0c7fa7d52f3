"""A scan's messages column by column, for readers that want columns (Spark).

:class:`Columns` holds what a ``COLUMNS`` :class:`~tieredstore.store.read.scan.QueueScan`
(a Spark slice's) read, with no ``Message`` per row: the offsets and
store times as numpy arrays, the bodies where the read left them
(:class:`BodyRun`: the records read, each body after its record's fields,
no copy), and tags, keys and properties only once a row has some. The
records are the ones the scan checked (each record's CRC32C, each unit's,
unit against record), exactly as for messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from typing import Any

import numpy as np

from tieredstore.store.formats.record import (
    NO_PROPERTIES,
    PLAIN_BODY_AT,
    CqUnit,
    Message,
    plain_run,
    store_times,
)
from tieredstore.store.read.arrays import UnitBlock, plain_run_block


@dataclass(frozen=True, slots=True)
class BodyRun:
    """Bodies laid one after the other in ``data``: body ``i`` is
    ``data[at[i] + skip : at[i + 1]]`` (``at``: int64, one more than bodies)."""

    data: bytes | memoryview
    at: Any
    skip: int

    def __len__(self) -> int:
        return len(self.at) - 1

    def body(self, i: int) -> bytes:
        return bytes(self.data[int(self.at[i]) + self.skip : int(self.at[i + 1])])


@dataclass(slots=True)
class Columns:
    """Messages of one queue, in offset order, as columns.

    ``tags``, ``keys`` and ``properties`` are None while no row has any (a
    row without: None, ``()``, an empty mapping). Bodies stay in the bytes
    the scan read (immutable: what a read returned): a batch pins the reads
    it came from, as a batch of messages holds copies of their bodies.
    """

    topic: str
    queue_id: int
    tags: list[str | None] | None = None
    keys: list[tuple[str, ...]] | None = None
    properties: list[Mapping[str, str]] | None = None
    _runs: list[BodyRun] = field(default_factory=list)
    _offsets: list[Any] = field(default_factory=list)
    _stamps: list[Any] = field(default_factory=list)
    _rows: int = 0  # in the runs
    _pending: list[Message] = field(default_factory=list)  # not yet in a run

    def __len__(self) -> int:
        return self._rows + len(self._pending)

    def append(self, message: Message) -> None:
        """One message (a record with tags, keys or properties, decoded in full)."""
        n = len(self)
        self._pending.append(message)
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
        """:func:`~tieredstore.store.formats.record.decode_plain_run` into columns: the
        same records checked and taken (:func:`~tieredstore.store.formats.record.plain_run`,
        or over arrays :func:`~tieredstore.store.read.arrays.plain_run_block`), the
        same result; their bodies left in ``view``."""
        room, first = max_bytes - total, not len(self)
        if isinstance(units, UnitBlock):
            starts = plain_run_block(view, units, start, stop, first_offset=first_offset,
                                     room=room, first=first)
        else:
            starts = np.array(plain_run(view, units, start, stop, first_offset=first_offset,
                                        room=room, first=first), dtype=np.int64)
        n = len(starts) - 1
        if n:
            self._flush()
            self._runs.append(BodyRun(view, starts, PLAIN_BODY_AT))
            first_row = first_offset + start
            self._offsets.append(np.arange(first_row, first_row + n, dtype=np.int64))
            self._stamps.append(units.store_timestamp[start:start + n]
                                if isinstance(units, UnitBlock)
                                else np.fromiter(store_times(units, start, n), np.int64, n))
            self._rows += n
            if self.tags is not None:
                self.tags += repeat(None, n)
            if self.keys is not None:
                self.keys += repeat((), n)
            if self.properties is not None:
                self.properties += repeat(NO_PROPERTIES, n)
        used = int(starts[-1])
        return start + n, used, total + used

    def _flush(self) -> None:
        """The messages appended one by one into a run of their own (bodies joined)."""
        pending = self._pending
        if not pending:
            return
        bodies = [m.body for m in pending]
        self._runs.append(BodyRun(b"".join(bodies), np.fromiter(
            accumulate(map(len, bodies), initial=0), np.int64, len(bodies) + 1), 0))
        self._offsets.append(np.array([m.offset for m in pending], dtype=np.int64))
        self._stamps.append(np.array([m.store_timestamp for m in pending], dtype=np.int64))
        self._rows += len(pending)
        pending.clear()

    def runs(self) -> list[BodyRun]:
        """The bodies, in row order."""
        self._flush()
        return self._runs

    def offsets(self) -> Any:
        """The rows' offsets (int64)."""
        self._flush()
        return _joined(self._offsets)

    def timestamps(self) -> Any:
        """The rows' store times in milliseconds (int64)."""
        self._flush()
        return _joined(self._stamps)

    def messages(self) -> list[Message]:
        """The rows as messages (what a message scan returns)."""
        bodies = [run.body(i) for run in self.runs() for i in range(len(run))]
        return [Message(self.topic, self.queue_id, offset, body, stamp,
                        self.keys[i] if self.keys else (),
                        self.tags[i] if self.tags else None,
                        self.properties[i] if self.properties else NO_PROPERTIES)
                for i, (offset, stamp, body) in enumerate(zip(
                    self.offsets().tolist(), self.timestamps().tolist(), bodies, strict=True))]


def _joined(arrays: list[Any]) -> Any:
    if len(arrays) == 1:
        return arrays[0]
    if not arrays:
        return np.empty(0, dtype=np.int64)
    arrays[:] = [np.concatenate(arrays)]
    return arrays[0]
