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
    """Checks of ``check`` (one request each), shared by time: at most one runs
    at a time, and the callers that come while it runs share the next one."""

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
            if run is not None and run.started < taken:
                # Too early for these bytes: the next check, once it ends, serves
                # every caller that came meanwhile. Its failure is that one's too.
                await asyncio.wait([run.task])
                continue
            if run is None:
                run = self._start()
            await asyncio.shield(run.task)
            self._passed = max(self._passed, run.started)

    def _start(self) -> _Check:
        run = _Check(time.monotonic(), asyncio.ensure_future(self._check()))
        self._running = run
        self.checks += 1

        def ended(_: object) -> None:
            if self._running is run:
                self._running = None
        run.task.add_done_callback(ended)
        return run

    async def check_now(self) -> None:
        """A check started now or later (before and after a claim, before a head
        write, and when a claim meets another writer's entry)."""
        await self.passed_since(time.monotonic())
