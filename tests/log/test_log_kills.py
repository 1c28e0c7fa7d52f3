"""SIGKILL a log-mode producer again and again, while group commits, compaction and
log-object deletion run (compaction age 0): every flushed message reads back
once, in order, and after recovery no log object outlives its pieces."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.store.producer import config
from tests.store.test_restart import check, run_and_kill
from tieredstore.store import AsyncMessageStore, log_path

pytestmark = pytest.mark.slow

LOG_MODE = {"write_mode": "log", "log_compact_age": 0.0, "gc_safety_age": 0.0,
            "chunk_size": 8 * 1024}


@pytest.mark.parametrize("seed", range(4))
async def test_kills_during_group_commits_compaction_and_deletion(tmp_path: Path,
                                                                  seed: int) -> None:
    spec: dict[str, Any] = {"backend": "local", "root": str(tmp_path / "data"),
                            "config": LOG_MODE}
    flushed: dict[tuple[str, int], int] = {}
    rng = random.Random(seed)
    for kill in range(3):  # the next producer recovers what the killed one left
        for key, count in run_and_kill(spec, rng.randrange(1 << 30)).items():
            flushed[key] = max(flushed.get(key, 0), count)
        assert flushed, f"kill {kill}: nothing was flushed"
    await check(spec, flushed)
    store = await AsyncMessageStore.open(config(spec))
    try:
        await store.compact_log(now=4_000_000_000.0)  # every piece is old enough
        log_dir = log_path(config(spec)).directory
        left = [o for o in await store.ctx.store.list_all(log_dir) if o.size]
        # Every piece moved into chunks; only the newest entry (never deleted) may hold bytes.
        assert len(left) <= 1, [o.key for o in left]
    finally:
        await store.close()
