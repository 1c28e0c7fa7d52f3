"""The writer check is shared by time: callers whose bytes were taken before a
check started share it; later ones share the next; a failure reaches all."""

from __future__ import annotations

import asyncio
import time

import pytest

from tieredstore.log import LogFenced, WriterGate


class Checks:
    def __init__(self, fail_after: int | None = None) -> None:
        self.started: list[float] = []
        self.fail_after = fail_after

    async def __call__(self) -> None:
        self.started.append(time.monotonic())
        await asyncio.sleep(0.01)
        if self.fail_after is not None and len(self.started) > self.fail_after:
            raise LogFenced("a newer store took the log over")


async def test_callers_share_checks_and_each_gets_one_started_after_its_bytes() -> None:
    checks = Checks()
    gate = WriterGate(checks)
    taken: list[float] = []

    async def commit(delay: float) -> float:
        await asyncio.sleep(delay)
        taken.append(mine := time.monotonic())
        await gate.passed_since(mine)
        return mine

    times = await asyncio.gather(*(commit(i * 0.001) for i in range(40)))
    # 40 callers over ~40 ms, checks of 10 ms one at a time: a handful of checks.
    assert 2 <= gate.checks <= 8, gate.checks
    assert len(checks.started) == gate.checks
    for mine in times:  # a check started after each caller's bytes were taken
        assert any(s >= mine for s in checks.started)


async def test_a_failed_check_fails_every_caller_waiting_and_every_later_one() -> None:
    checks = Checks(fail_after=1)
    gate = WriterGate(checks)
    await gate.check_now()
    results = await asyncio.gather(*(gate.check_now() for _ in range(10)),
                                   return_exceptions=True)
    assert all(isinstance(r, LogFenced) for r in results), results
    with pytest.raises(LogFenced):
        await gate.passed_since(time.monotonic())
