"""Background: start, error capture, periodic passes, wait until idle, close order;
the bounded fan-out."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tieredstore.errors import ServerError
from tieredstore.tasks import Background, gather_bounded


async def test_a_failed_background_task_is_logged_and_wait_idle_raises_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    background = Background()

    async def fails() -> None:
        raise ServerError("outage", op="put", key="k")

    async def bug() -> None:
        raise KeyError("bug")

    background.spawn(fails(), "merge a")
    background.spawn(bug(), "merge b")
    with caplog.at_level(logging.WARNING, logger="tieredstore.tasks"):
        assert await background.wait_idle() is True
    # Only this supervisor's records: a store another test left open may log beside it.
    ours = [r for r in caplog.records if r.name == "tieredstore.tasks"]
    warning, error = sorted(ours, key=lambda r: r.levelno)
    assert (warning.levelno, error.levelno) == (logging.WARNING, logging.ERROR)
    assert "background merge a failed: outage" in warning.getMessage()
    assert error.exc_info is not None, "a bug is logged with its traceback"
    assert await background.wait_idle() is False, "nothing left to wait for"


async def test_wait_idle_waits_for_work_started_while_it_waits() -> None:
    background = Background()
    done: list[str] = []

    async def second() -> None:
        await asyncio.sleep(0.01)
        done.append("second")

    async def first() -> None:
        await asyncio.sleep(0.01)
        background.spawn(second(), "second")
        done.append("first")

    background.spawn(first(), "first")
    await background.wait_idle()
    assert done == ["first", "second"]


async def test_a_periodic_loop_goes_on_after_a_failed_pass_and_ends_on_false() -> None:
    background = Background()
    passes: list[int] = []

    async def work() -> bool:
        passes.append(len(passes))
        if len(passes) == 1:
            raise ServerError("outage", op="list", key="k")
        return len(passes) < 3

    loop = background.every(0.001, "gc", work)
    await asyncio.wait_for(loop, 5)
    assert passes == [0, 1, 2]
    assert await background.wait_idle() is False, "loops are not waited for"


async def test_close_cuts_loops_and_started_tasks_short_and_lets_spawned_work_finish() -> None:
    background = Background()
    finished: list[str] = []
    gate = asyncio.Event()

    async def forever() -> None:
        await gate.wait()

    async def write() -> None:
        await asyncio.sleep(0.01)
        finished.append("write")

    loop = background.every(0.001, "pass", lambda: asyncio.sleep(0))
    load = background.start(forever(), "load")
    background.spawn(write(), "write")
    await background.close()
    assert loop.cancelled() and load.cancelled()
    assert finished == ["write"]
    assert not background.busy


async def test_gather_bounded_runs_at_most_limit_at_a_time_in_order() -> None:
    running = peak = 0

    async def work(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (n % 3))
        running -= 1
        return n * n

    assert await gather_bounded(3, work, range(20)) == [n * n for n in range(20)]
    assert peak == 3


async def test_gather_bounded_cancels_the_rest_on_the_first_failure() -> None:
    started: list[int] = []
    cancelled: list[int] = []

    async def work(n: int) -> None:
        started.append(n)
        if n == 1:
            raise ServerError("outage", op="put", key="k")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise

    with pytest.raises(ServerError, match="outage"):
        await gather_bounded(2, work, range(5))
    assert started == [0, 1, 2]  # the failed slot goes to 2; 3 and 4 never start
    assert sorted(cancelled) == [0, 2]  # and none is left running
