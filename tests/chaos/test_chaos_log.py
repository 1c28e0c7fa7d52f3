"""Chaos in write mode log: the workload of ``test_chaos.py`` (faults of every kind,
takeovers, reopens, rolls, merges, retention) with every small commit going to
the broker's log objects. Half of the seeds consolidate, compact and delete
log objects as soon as they can (age 0; fences and dead objects 50 ms
after a store sees them), so that these race the writes, the takeovers and
the faults; the other half consolidate every 8 KiB and compact only on full
chunks and rolls."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.harness import SeedResult, run_seeds, seeds_from_env

pytestmark = pytest.mark.slow

SEEDS = seeds_from_env(8)  # TIEREDSTORE_CHAOS_SEEDS, as in test_chaos.py


def log_mode(seed: int) -> dict[str, Any]:
    """The store of ``seed``: write mode log, eager or lazy by the seed's parity."""
    age = 0.0 if seed % 2 else 3600.0
    # A small safety age, not 0: fences are deleted (0 keeps them), and a store
    # idle for half of it lists the log before it writes.
    safety = 0.05 if seed % 2 else 3600.0
    return {"write_mode": "log", "log_compact_age": age, "gc_safety_age": safety,
            "log_consolidate_interval": age, "log_consolidate_bytes": 8 * 1024}


@pytest.fixture(scope="module")
async def results() -> dict[int, SeedResult]:
    return await run_seeds(SEEDS, 300, log_mode)


@pytest.mark.parametrize("seed", SEEDS)
async def test_chaos_log_seed(results: dict[int, SeedResult], seed: int) -> None:
    result = results[seed]
    assert result.violation is None, result.violation
    assert not result.known_hits and result.known_bug is None, result.known_hits
    assert result.acked > 100 and result.checked > result.acked
