"""BucketWatch's passes: what scrapes cost (read-only, in process)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.objectstore import ObjectInfo
from tieredstore.store import BucketWatch, MessageStore, ReadOnlyCluster, open_object_store
from tieredstore.testing import ForwardingObjectStore


def bucket(root: Path) -> TieredStoreConfig:
    config = load_config(env={}, backend="local", local_path=str(root), local_fsync=False,
                         group_commit_interval=0.02, gc_interval=0)
    with MessageStore.open(config) as store:
        for queue in range(2):
            for i in range(5):
                store.append("t", queue, bytes([i]) * 100)
        store.flush()
    return config


def test_concurrent_scrapes_share_a_pass_that_outlasts_min_interval(tmp_path: Path) -> None:
    """Scrapes that arrive while a pass runs take its figures, even when the pass
    takes longer than ``min_interval`` (here each reading of the clock is 100 s
    later): otherwise each waiting scrape made a pass of its own after it, and
    scrapes arriving faster than passes end queued passes without bound."""
    config = bucket(tmp_path)
    ticks = itertools.count(0, 100)

    async def main() -> tuple[int, list[int]]:
        async with await ReadOnlyCluster.open(config) as reader:
            watch = BucketWatch(reader, min_interval=10, clock=lambda: float(next(ticks)))
            got = await asyncio.gather(*(watch.figures() for _ in range(4)))
            return watch.metrics.refreshes, [len(f) for f in got]

    refreshes, counts = asyncio.run(main())
    assert counts == [2, 2, 2, 2]
    assert refreshes == 1, f"4 concurrent scrapes made {refreshes} passes"


def test_a_scrape_after_min_interval_makes_a_new_pass(tmp_path: Path) -> None:
    config = bucket(tmp_path)
    now = [0.0]

    async def main() -> list[int]:
        async with await ReadOnlyCluster.open(config) as reader:
            watch = BucketWatch(reader, min_interval=10, clock=lambda: now[0])
            passes = []
            for at in (0.0, 5.0, 10.0, 12.0, 25.0):
                now[0] = at
                await watch.figures()
                passes.append(watch.metrics.refreshes)
            return passes

    assert asyncio.run(main()) == [1, 1, 2, 2, 3]


class Unlistable(ForwardingObjectStore):
    """Its listings fail while ``broken``."""

    broken = False

    async def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        if self.broken:
            raise RuntimeError("the bucket cannot be listed")
        async for page in super().list_pages(prefix):
            yield page


def test_a_failed_pass_is_no_pass_the_next_scrape_tries_again(tmp_path: Path) -> None:
    """A pass that fails fails the scrape, and the next scrape makes a pass, however
    soon: it used to count as a pass, so scrapes within ``min_interval`` after it
    answered with the figures of the pass before (HTTP 200, ``up`` = 1), hiding
    the failure; after a failed first pass, with no queue at all."""
    config = bucket(tmp_path)
    now = [0.0]

    async def main() -> None:
        store = Unlistable(open_object_store(config), close_inner=True)
        async with await ReadOnlyCluster.open(config, store=store) as reader:
            watch = BucketWatch(reader, min_interval=10, clock=lambda: now[0])
            assert len(await watch.figures()) == 2
            store.broken = True
            for at in (20.0, 21.0):
                now[0] = at
                with pytest.raises(RuntimeError, match="cannot be listed"):
                    await watch.figures()
            store.broken = False
            now[0] = 22.0
            assert len(await watch.figures()) == 2
            assert watch.metrics.refreshes == 2
        await store.close()

    asyncio.run(main())
