"""The writer check, shared by the commits waiting for one (docs/writers.md,
"The writer check").

A commit of appended bytes to a segment may be sent only once a check of the
log that *started after its bytes were taken* passed: a newer store's fence
or fill takes this store's next log id before that store's open returns, so
such a check proves the bytes were appended before any newer open returned.
Commits taken before a check started share it; one taken later starts the
next. A check that fails fails every commit waiting on it, and every later
one (:class:`LogFenced`, for good).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Check:
    started: float
    task: asyncio.Future[None]


class WriterGate:
    """Checks of ``check`` (one request each), shared by time."""

    def __init__(self, check: Callable[[], Awaitable[None]]) -> None:
        self._check = check
        self._passed = -1.0  # when the newest check that passed started (monotonic)
        self._running: _Check | None = None
        self.checks = 0

    async def passed_since(self, taken: float) -> None:
        """Return once a check started at or after ``taken`` (``time.monotonic()``)
        passed; raise what the check raised."""
        while self._passed < taken:
            run = self._running
            if run is None or run.started < taken:
                run = _Check(time.monotonic(), asyncio.ensure_future(self._check()))
                self._running = run
                self.checks += 1
            try:
                await asyncio.shield(run.task)
            finally:
                if self._running is run and run.task.done():
                    self._running = None
            self._passed = max(self._passed, run.started)

    async def check_now(self) -> None:
        """A check started now (before and after a claim, and when a claim meets
        another writer's entry)."""
        await self.passed_since(time.monotonic())
