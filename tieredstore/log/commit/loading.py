"""Loading the committed state: the newest checkpoint and the entries that count.

A reader of committed state (docs/log-objects.md, "Version 2") lists the log
(all pages), reads indexes from the newest entry down (1, 2, 4, ... 16 at a
time) until it meets a checkpoint, reads the states that checkpoint holds and
the indexes of the live ids it lists, and folds the records of the entries above it. Ids below the
checkpoint that it does not list do not count, whatever is stored there. An
entry listed and gone, or a live id not listed, means the listing is older
than a deletion below a newer checkpoint: the load starts again, and after
:data:`LOADS` loads it is :class:`LogCorrupt`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.errors import ObjectNotFound
from tieredstore.log.commit.checkpoint import CheckpointIndex, decode_states
from tieredstore.log.commit.state import CommittedState, QueueId
from tieredstore.log.errors import LogCorrupt
from tieredstore.log.index import DataIndex, EntryIndex, read_entry
from tieredstore.log.keys import LogPath
from tieredstore.log.series import LogEntry, LogSeries
from tieredstore.objectstore import ByteRange, ObjectStore
from tieredstore.tasks import gather_bounded

READ_CONCURRENCY = 16
LOADS = 3


@dataclass(frozen=True, slots=True)
class CommittedLog:
    """What one load found: the committed state, the data entries that count
    (above the checkpoint, and the live ones below it) with their indexes, in
    id order, and the newest checkpoint's id (None: the log holds none)."""

    state: CommittedState
    entries: list[tuple[LogEntry, DataIndex]]
    checkpoint: int | None


async def load_committed(store: ObjectStore, path: LogPath,
                         queues: Sequence[QueueId] | None = None) -> CommittedLog:
    """The committed state of ``queues`` (every queue with None) and the entries
    that count: one paged LIST, one ranged GET per index read, one for the
    checkpoint's states."""
    for attempt in range(1, LOADS + 1):
        try:
            return await _load_once(store, path, queues)
        except ObjectNotFound as exc:
            if attempt == LOADS:
                raise LogCorrupt(path.directory, f"an entry listed was gone in {LOADS} loads "
                                                 f"in a row: {exc}") from None
    raise AssertionError("unreachable")


async def _load_once(store: ObjectStore, path: LogPath, queues: Sequence[QueueId] | None
                     ) -> CommittedLog:
    listed = [e for e in await LogSeries(store, path, "").entries() if not e.fence]
    above: list[tuple[LogEntry, EntryIndex]] = []
    checkpoint: tuple[LogEntry, CheckpointIndex] | None = None
    end, batch_size = len(listed), 1
    while end > 0 and checkpoint is None:
        batch = listed[max(0, end - batch_size):end]
        for entry, read in reversed(list(zip(batch, await _read(store, batch), strict=True))):
            if isinstance(read, BaseException):
                raise read
            if isinstance(read, CheckpointIndex):
                checkpoint = entry, read
                break  # below it: read in this batch, counted only if it lists them
            above.append((entry, read))
        end -= len(batch)
        batch_size = min(READ_CONCURRENCY, 2 * batch_size)
    above.reverse()
    state = CommittedState()
    counted: list[tuple[LogEntry, DataIndex]] = []
    if checkpoint is not None:
        entry, index = checkpoint
        start, length = index.span()
        data = await store.get(entry.key, ByteRange(start, length)) if length else b""
        state = CommittedState(decode_states(data, start, index, queues, key=entry.key))
        counted = await _live(store, listed, index, entry)
    for entry, read in above:
        assert isinstance(read, DataIndex)
        state.fold(entry.key, read.records)
        counted.append((entry, read))
    return CommittedLog(state, counted, checkpoint[0].seq if checkpoint else None)


async def _read(store: ObjectStore, entries: Sequence[LogEntry]
                ) -> list[EntryIndex | Exception]:
    """Each entry's index, or what reading it raised (an entry below the
    checkpoint that it does not list counts for nothing, its damage too)."""
    async def one(entry: LogEntry) -> EntryIndex | Exception:
        try:
            return await read_entry(store, entry.key, entry.size)
        except (ObjectNotFound, LogCorrupt) as exc:
            return exc
    return await gather_bounded(READ_CONCURRENCY, one, entries)


async def _live(store: ObjectStore, listed: Sequence[LogEntry], index: CheckpointIndex,
                checkpoint: LogEntry) -> list[tuple[LogEntry, DataIndex]]:
    """The live entries ``index`` lists below ``checkpoint``, with their indexes."""
    by_seq = {e.seq: e for e in listed}
    missing = [n for n in index.live if n not in by_seq]
    if missing:
        raise ObjectNotFound(f"live log id {missing[0]} of checkpoint {checkpoint.key} is "
                             "not listed")
    entries = [by_seq[n] for n in index.live]
    found: list[tuple[LogEntry, DataIndex]] = []
    for entry, read in zip(entries, await _read(store, entries), strict=True):
        if isinstance(read, Exception):
            raise read
        if not isinstance(read, DataIndex) or entry.seq >= checkpoint.seq:
            raise LogCorrupt(checkpoint.key, f"lists {entry.key} as a live data entry "
                                             "below it")
        found.append((entry, read))
    return found
