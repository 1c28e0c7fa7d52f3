"""The broker's log series: entries ``log-{n}``, created in order, fenced by a newer store.

The rules of a segment's chunk series, for the whole broker (docs/log-objects.md,
"Log objects"): every entry is created with ``If-None-Match: *`` at the id
after the newest its writer knows, never skipping, never overwritten. A store
that opens for writing :meth:`LogSeries.claim`\\ s the log with a zero-byte
fence at the id after the newest entry, so a replaced store's next create
targets a taken id and fails: :class:`LogFenced`. A create refused because
its own earlier attempt landed (a lost reply) is recognised by its writer id,
size and CRC, and succeeds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.errors import ObjectNotFound, TransientError
from tieredstore.log.errors import LogFenced
from tieredstore.log.keys import LogPath
from tieredstore.objectstore import ObjectStore
from tieredstore.segment.conditional import create_entry
from tieredstore.segment.recovery import FENCE_ENTRY, WRITER_METADATA_KEY

# The clock of the idle look: one that goes on while the machine is suspended
# (CLOCK_BOOTTIME), so that a store suspended for long looks on waking.
_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def _now() -> float:
    return time.clock_gettime(_CLOCK)


LOG_ENTRY = "log"
CLAIM_ATTEMPTS = 20
MAX_JUMP = 64


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry of the series as a listing shows it. Only fences are empty."""

    seq: int
    key: str
    size: int

    @property
    def fence(self) -> bool:
        return self.size == 0


class LogSeries:
    """One store's handle on its broker's log. ``writer_id`` must be new at every
    open (random): it is how a create tells its own lost reply from another
    store's entry.

    ``recheck_after``: seconds after its last create that landed (or its claim)
    past which the next create first lists the log, because fences this old may
    have been deleted (docs/log-objects.md, "An idle writer looks before it writes").
    The store passes half its ``gc_safety_age``; infinite: never."""

    def __init__(self, store: ObjectStore, path: LogPath, writer_id: str, *,
                 recheck_after: float = math.inf) -> None:
        self.store = store
        self.path = path
        self.writer_id = writer_id
        self.recheck_after = recheck_after
        self._next: int | None = None
        self._fenced = False
        # When the claim, or the last create that landed, was *sent* (_now()): a
        # reply that came late proves the id was free only as of the request.
        self._checked = 0.0
        self.own_fills: list[int] = []  # ids the claim filled with fences of ours

    @property
    def next_seq(self) -> int | None:
        """The id this store creates next (None before :meth:`claim`)."""
        return self._next

    @property
    def fenced(self) -> bool:
        return self._fenced

    async def entries(self) -> list[LogEntry]:
        """Every entry of the log, in sequence order (all pages of the listing)."""
        found: list[LogEntry] = []
        for info in await self.store.list_all(self.path.directory):
            seq = self.path.parse(info.key)
            if seq is not None:
                found.append(LogEntry(seq, info.key, info.size))
        return sorted(found, key=lambda e: e.seq)

    async def claim(self) -> list[LogEntry]:
        """Take the log over: fence it at the id after its newest entry. Returns
        the entries before the fence, which no older store can add to.

        The store we replace goes on writing until it meets our fence, and a
        busy one takes the id after the newest again and again: after the
        first miss the fence goes further ahead (1, 3, 7, ... ids past the
        newest, at most :data:`MAX_JUMP`), and once it stands every id it
        skipped is filled, in order, with a zero-byte fence of ours, or found
        taken by the other store's entry, which is then one of those returned.
        When the newest entry listed is another store's fence, the ids missing
        just below it (a claim in progress that has not filled them yet) are
        filled the same way. So no id below our fence stays free for an older
        store, and none of its entries below our fence is unknown."""
        jump = 0
        for _ in range(CLAIM_ATTEMPTS):
            found = await self.entries()
            seq = found[-1].seq + 1 if found else 0
            sent = _now()
            if await create_entry(self.store, self.path.key(seq + jump), b"",
                                  self.writer_id, FENCE_ENTRY):
                gap = _unfilled(found)
                theirs = await self._fill(gap.start, gap.stop)
                theirs += await self._fill(seq, seq + jump)
                taken = {e.seq for e in theirs}
                self.own_fills = [n for n in [*gap, *range(seq, seq + jump)]
                                  if n not in taken]
                found = sorted(found + theirs, key=lambda e: e.seq)
                self._next = seq + jump + 1
                self._fenced = False
                self._checked = sent
                return found
            jump = min(MAX_JUMP, 2 * jump + 1)
        raise TransientError(f"could not fence the log at {self.path.directory} in "
                             f"{CLAIM_ATTEMPTS} attempts: another store keeps taking the id")

    async def _fill(self, start: int, end: int) -> list[LogEntry]:
        """Take every id in ``[start, end)`` with a fence; the other store's entries
        found there instead."""
        theirs: list[LogEntry] = []
        for seq in range(start, end):
            key = self.path.key(seq)
            if await create_entry(self.store, key, b"", self.writer_id, FENCE_ENTRY):
                continue
            try:
                info = await self.store.head(key)
            except ObjectNotFound:  # taken, then deleted: its bytes are in chunks
                continue
            theirs.append(LogEntry(seq, key, info.size))
        return theirs

    async def replaced(self) -> bool:
        """Whether a newer store claimed the log (:meth:`check`)."""
        if self._next is None:
            return False
        try:
            await self.check()
        except LogFenced:
            return True
        return False

    async def check(self) -> None:
        """:class:`LogFenced` if a newer store claimed the log (docs/writers.md,
        "The writer check"): one HEAD of the id this store creates next, which a
        newer store's fence or fill takes before its open returns; a listing
        instead past ``recheck_after`` since the last create or look, for fences
        that old may have been deleted."""
        if self._next is None:
            raise RuntimeError("LogSeries.check before claim")
        if self._fenced:
            raise LogFenced(f"the log at {self.path.directory} was taken over by a newer store")
        seq = self._next
        sent = _now()
        if sent - self._checked > self.recheck_after:
            await self._look_before_writing(seq)
        elif await self._ours(seq) is False:
            self._fenced = True
            raise LogFenced(f"log entry {self.path.key(seq)} is another store's: a newer "
                            "store took the log over")

    async def _ours(self, seq: int) -> bool | None:
        """Whether entry ``seq`` is this store's (one HEAD); None if there is none."""
        try:
            info = await self.store.head(self.path.key(seq))
        except ObjectNotFound:
            return None
        return info.metadata.get(WRITER_METADATA_KEY) == self.writer_id

    async def append(self, data: bytes) -> LogEntry:
        """Create the next entry holding ``data``; :class:`LogFenced` once a newer
        store claimed the log (then for good)."""
        if self._next is None:
            raise RuntimeError("LogSeries.append before claim")
        if self._fenced:
            raise LogFenced(f"the log at {self.path.directory} was taken over by a newer store")
        if not data:
            raise ValueError("a log entry holds bytes (only fences are empty)")
        seq = self._next
        key = self.path.key(seq)
        sent = _now()
        if sent - self._checked > self.recheck_after:
            await self._look_before_writing(seq)
        if not await create_entry(self.store, key, data, self.writer_id, LOG_ENTRY):
            self._fenced = True
            raise LogFenced(f"log entry {key} is another store's: a newer store took the "
                            "log over")
        self._next = seq + 1
        self._checked = sent
        return LogEntry(seq, key, len(data))

    async def _look_before_writing(self, seq: int) -> None:
        """After a long idle: an entry past ``seq``, or one at ``seq`` that is not
        our own earlier attempt, is another store's, so a newer store took the log
        over, and the fence that would refuse our create may have been deleted
        since. One listing (and a HEAD if ``seq`` is taken)."""
        sent = _now()
        listed = await self.entries()
        # A check runs beside this store's appends: the entries they created while
        # the listing ran are its own, so the next entry is the one to look from.
        assert self._next is not None
        seq = max(seq, self._next)
        newer = [e for e in listed if e.seq > seq]
        # At ``seq``: our own create whose answer was lost, sent again now; or
        # another's. Gone since the listing: deleted, so not the newest entry:
        # another store wrote past it.
        if not newer and any(e.seq == seq for e in listed) and not await self._ours(seq):
            newer = [e for e in listed if e.seq == seq]
        if newer:
            self._fenced = True
            raise LogFenced(f"the log at {self.path.directory} holds {newer[-1].key}, past "
                            f"this store's next entry {self.path.key(seq)}: a newer store "
                            "took the log over")
        self._checked = sent


def _unfilled(found: Sequence[LogEntry]) -> range:
    """Ids a claim in progress may not have filled yet: when the newest entry is a
    fence, the ids missing just below it (at most :data:`MAX_JUMP`). Another
    store fences ahead of a busy one and fills the ids it skipped only after;
    a claim in between must take them too, or the busy store's entry there
    would be unknown to it."""
    if not found or not found[-1].fence:
        return range(0)
    newest = found[-1].seq
    below = found[-2].seq if len(found) > 1 else -1
    return range(max(below + 1, newest - MAX_JUMP), newest)
