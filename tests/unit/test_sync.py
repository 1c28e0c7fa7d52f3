"""The sync bridge: one-shot runs and async iterators, with and without a
running loop in the calling thread (a notebook runs one)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from tieredstore import sync


async def thread_name() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


def test_run_without_a_loop_runs_in_this_thread() -> None:
    assert sync.run(thread_name()) == threading.current_thread().name


def test_run_inside_a_running_loop_uses_a_thread_of_its_own() -> None:
    async def notebook_cell() -> str:
        return sync.run(thread_name())  # asyncio.run would raise here

    assert asyncio.run(notebook_cell()) == "tieredstore-run"
    assert not any(t.name == "tieredstore-run" for t in threading.enumerate())


def test_run_raises_the_coroutines_error() -> None:
    async def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        sync.run(fail())


def test_iterate_yields_every_item_and_closes_the_source() -> None:
    closed: list[bool] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            for i in range(5):
                await asyncio.sleep(0)
                yield i
        finally:
            closed.append(True)

    assert list(sync.iterate(numbers)) == [0, 1, 2, 3, 4]
    assert closed == [True]


def test_iterate_stopped_early_closes_the_source_and_its_thread() -> None:
    closed: list[bool] = []

    async def endless() -> AsyncIterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.append(True)

    items = sync.iterate(endless)
    assert [next(items), next(items)] == [0, 1]
    items.close()  # what a consumer that stops early does (or garbage collection)
    assert closed == [True]
    assert not any(t.name == "tieredstore-iterate" for t in threading.enumerate())


def test_iterate_reading_ahead_yields_every_item_raises_and_closes() -> None:
    closed: list[bool] = []

    async def numbers(fail: bool) -> AsyncIterator[int]:
        try:
            for i in range(5):
                await asyncio.sleep(0)
                yield i
            if fail:
                raise KeyError("boom")
        finally:
            closed.append(True)

    assert list(sync.iterate(lambda: numbers(False), ahead=2)) == [0, 1, 2, 3, 4]
    with pytest.raises(KeyError, match="boom"):
        list(sync.iterate(lambda: numbers(True), ahead=1))
    items = sync.iterate(lambda: numbers(False), ahead=1)
    assert next(items) == 0
    items.close()
    assert closed == [True, True, True]
    assert not any(t.name == "tieredstore-iterate" for t in threading.enumerate())
