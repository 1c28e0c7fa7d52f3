"""SingleFlight: concurrent identical reads share one run; fresh callers only work
begun after their call; nothing kept past the run; a caller leaving cancels
nothing for the others; a failure reaches every caller."""

from __future__ import annotations

import asyncio

import pytest

from tieredstore.errors import ServerError
from tieredstore.tasks import Background, Priority, SingleFlight, current_priority


class Counted:
    """A read that counts its runs, each returning its run number once released."""

    def __init__(self) -> None:
        self.runs = 0
        self.release = asyncio.Event()
        self.priorities: list[Priority] = []

    async def __call__(self) -> int:
        self.runs += 1
        n = self.runs
        await self.release.wait()
        self.priorities.append(current_priority())
        return n


async def test_concurrent_calls_for_one_key_share_one_run() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    read = Counted()
    calls = [asyncio.ensure_future(flights.run("k", read)) for _ in range(50)]
    await asyncio.sleep(0)
    read.release.set()
    assert await asyncio.gather(*calls) == [1] * 50
    assert (read.runs, flights.runs, flights.joined) == (1, 1, 49)
    assert "k" not in flights, "nothing kept past the run"
    assert await flights.run("k", read) == 2, "a later call runs the work again"


async def test_different_keys_run_apart() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    read = Counted()
    read.release.set()
    assert await asyncio.gather(flights.run("a", read), flights.run("b", read)) == [1, 2]


async def test_a_fresh_caller_never_joins_work_begun_before_its_call() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    read = Counted()
    first = asyncio.ensure_future(flights.run("k", read, fresh=True))
    early = asyncio.ensure_future(flights.run("k", read, fresh=True))  # before it began
    await asyncio.sleep(0.01)
    assert read.runs == 1, "a caller that came before the work began joins it"
    late = [asyncio.ensure_future(flights.run("k", read, fresh=True)) for _ in range(10)]
    plain = asyncio.ensure_future(flights.run("k", read))
    await asyncio.sleep(0.01)
    assert read.runs == 1, "the next run waits for the one under way"
    read.release.set()
    assert await asyncio.gather(first, early) == [1, 1]
    assert await asyncio.gather(*late, plain) == [2] * 11, "one run for all who came meanwhile"
    assert read.runs == 2


async def test_a_failure_reaches_every_caller() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    runs = 0

    async def fails() -> int:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0.01)
        raise ServerError("outage", op="list", key="k")

    got = await asyncio.gather(*(flights.run("k", fails) for _ in range(5)),
                               return_exceptions=True)
    assert runs == 1
    assert all(isinstance(e, ServerError) for e in got), got


async def test_a_caller_that_gives_up_cancels_the_work_only_when_it_was_the_last() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    read = Counted()
    leaving = asyncio.ensure_future(flights.run("k", read))
    staying = asyncio.ensure_future(flights.run("k", read))
    await asyncio.sleep(0.01)
    leaving.cancel()
    await asyncio.sleep(0.01)
    read.release.set()
    assert await staying == 1
    with pytest.raises(asyncio.CancelledError):
        await leaving

    read2 = Counted()
    alone = asyncio.ensure_future(flights.run("j", read2))
    await asyncio.sleep(0.01)
    alone.cancel()
    await asyncio.sleep(0.01)
    assert "j" not in flights, "the work nobody waits for is cancelled"
    read2.release.set()
    await asyncio.sleep(0.01)
    assert read2.priorities == [], "it never finished"


async def test_a_joining_caller_raises_the_works_priority() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    read = Counted()
    tasks = Background()
    background = tasks.start(flights.run("k", read), "gc read", priority=Priority.GC)
    await asyncio.sleep(0.01)
    host = asyncio.ensure_future(flights.run("k", read))
    await asyncio.sleep(0.01)
    read.release.set()
    assert await asyncio.gather(background, host) == [1, 1]
    assert read.priorities == [Priority.HOST], "the work went on at the host's priority"
