"""A continuous export's driver (``tieredstore spark export --continuous``)
SIGKILLed twice while a micro-batch is in flight: once as soon as it has
written data files that no Delta commit holds, once at a seeded random moment
after Spark planned it (reading, writing files, committing to Delta, or
between that and Spark's own commit), while a writer in another process
appends and flushes: restarted from its checkpoint
each time, the table ends holding every flushed message exactly once, read by
delta-rs (the writer's own record of what it flushed is the oracle)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.spark.test_stream_kill import env, kill, start_writer, wait_for
from tieredstore.spark.jobs.continuous import CHECKPOINT_DIR

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def start_export(store: Path, table: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tieredstore.cli", "spark", "--master", "local[2]", "export",
             "--data-dir", str(store), "--output", str(table), "--continuous",
             "--trigger", "300ms", "--max-messages-per-batch", "150"],
            env=env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def batches(table: Path, log: str) -> int:
    """How many batches the query's checkpoint has in ``log``: ``offsets`` (planned,
    written before a batch runs) or ``commits`` (done, after its foreachBatch)."""
    found = table / CHECKPOINT_DIR / log
    return len([p for p in found.iterdir() if p.name.isdigit()]) if found.is_dir() else 0


def in_flight(table: Path, done: int) -> bool:
    """At least ``done`` batches done, and the next one planned, not done."""
    committed = batches(table, "commits")
    return committed >= done and batches(table, "offsets") > committed


def uncommitted_files(table: Path, done: int) -> bool:
    """A batch in flight (:func:`in_flight`) has written data files that no Delta
    commit holds yet."""
    if not in_flight(table, done):
        return False
    on_disk = len(list(table.glob("topic=*/date=*/*.parquet")))
    return on_disk > len(DeltaTable(str(table)).file_uris())


def identities(table: Path) -> list[tuple[Any, ...]]:
    if not DeltaTable.is_deltatable(str(table)):
        return []
    rows = DeltaTable(str(table)).to_pyarrow_table(
        columns=["broker", "topic", "queue_id", "offset"]).to_pylist()
    return sorted((r["broker"], r["topic"], r["queue_id"], r["offset"]) for r in rows)


def test_a_sigkilled_continuous_export_restarts_and_holds_each_message_once(
        tmp_path: Path) -> None:
    store, table, done, log = (tmp_path / "store", tmp_path / "table", tmp_path / "flushed",
                               tmp_path / "driver.log")
    writer = start_writer(store, done)
    rng = random.Random(42)
    wait_for(done.exists, 60, log)
    driver = start_export(store, table, log)
    try:
        # Killed with a batch in flight, twice: files written and not committed,
        # then at a random moment.
        for target, when in ((1, uncommitted_files), (3, in_flight)):
            deadline = time.monotonic() + 180
            while not when(table, target) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert when(table, target), log.read_text(errors="replace")[-3000:]
            time.sleep(0 if when is uncommitted_files else rng.uniform(0, 3))
            kill(driver)  # (the batch's commit may have landed meanwhile: a kill after it)
            driver = start_export(store, table, log)
        assert writer.wait(120) == 0
        flushed = sorted(tuple(json.loads(line)) for line in done.read_text().splitlines())
        wait_for(lambda: len(identities(table)) >= len(flushed), 180, log)
    finally:
        kill(driver)
        if writer.poll() is None:
            writer.kill()
    got = identities(table)
    assert len(got) == len(set(got)), "a message was exported twice"
    assert got == flushed, (len(got), len(flushed))
    assert {k[0] for k in got} == {"broker-0", "broker-1"}  # a broker that came later
    text = log.read_text(errors="replace")
    assert "exported" in text, text[-3000:]
