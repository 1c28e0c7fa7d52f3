"""GroupCommitTimer: one loop timer for many deadlines that all share an interval.

Keys are added when they get their oldest unflushed byte; each fires once,
``interval`` seconds later, unless discarded first. Adding never moves an
earlier deadline, so insertion order is deadline order: one ``call_at``
handle, armed for the first key, serves them all (no task or sleep loop per
segment). The keys due at once fire in one call, so a callback that looks at
every buffer (a log-mode group commit) does so once per run of the timer, not
once per key: 1,000 quiet queues whose consume-queue bytes wait out group
commits (``chunk_wait``) fall due together.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# asyncio may run a timer up to its clock resolution early.
_SLACK = 0.001


class GroupCommitTimer(Generic[K]):
    """Calls ``fire(keys)`` ``interval`` seconds after ``add(key)`` of each of
    ``keys`` (those due at once, in deadline order)."""

    def __init__(self, interval: float, fire: Callable[[list[K]], None]) -> None:
        self.interval = interval
        self._fire = fire
        self._since: OrderedDict[K, float] = OrderedDict()
        self._handle: asyncio.TimerHandle | None = None
        self._stopped = False

    def __len__(self) -> int:
        return len(self._since)

    def add(self, key: K) -> None:
        """Start ``key``'s interval now, unless it is already running."""
        if key in self._since or self._stopped:
            return
        self._since[key] = asyncio.get_running_loop().time()
        self._arm()

    def discard(self, key: K) -> None:
        self._since.pop(key, None)

    def stop(self) -> None:
        """Fire nothing more, now or later."""
        self._stopped = True
        self._since.clear()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self) -> None:
        if self._handle is not None or not self._since:
            return
        first = next(iter(self._since.values()))
        loop = asyncio.get_running_loop()
        self._handle = loop.call_at(first + self.interval, self._on_timer)

    def _on_timer(self) -> None:
        self._handle = None
        now = asyncio.get_running_loop().time() + _SLACK
        due: list[K] = []
        while self._since:
            key, since = next(iter(self._since.items()))
            if since + self.interval > now:
                break
            del self._since[key]
            due.append(key)
        if due:
            self._fire(due)
        self._arm()
