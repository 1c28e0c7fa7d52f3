"""A streaming query's driver SIGKILLed twice while a writer in another process
appends and flushes: restarted from its checkpoint each time, the query's
Parquet sink ends holding every flushed message exactly once (compared as
``(broker, topic, queue_id, offset)``: the writer's own record is the oracle)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import store_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import json, sys, time
from tieredstore.config import load_config
from tieredstore.store import MessageStore
settings, done, rounds = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
base = load_config(env={}, **settings)
stores = {}
try:
    for r in range(rounds):
        broker = "broker-0" if r < rounds // 2 else ("broker-0", "broker-1")[r % 2]
        if broker not in stores:
            stores[broker] = MessageStore.open(base.replace(broker=broker))
        store = stores[broker]
        written = [(broker, "t", q, store.append("t", q, b"m" * 200))
                   for q in (0, 1, 2 if r > rounds // 3 else 0) for _ in range(15)]
        store.flush()
        with open(done, "a") as out:   # flushed: the oracle
            out.writelines(json.dumps(w) + "\\n" for w in written)
        time.sleep(0.25)
finally:
    for s in stores.values():
        s.close()
"""

DRIVER = """
import sys
from tieredstore.spark import get_session
spark = get_session("local[2]", app_name="stream-kill",
                    conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
spark.sparkContext.setLogLevel("ERROR")
store, sink = sys.argv[1], sys.argv[2]
query = (spark.readStream.format("tieredstore").option("path", store)
         .option("maxOffsetsPerTrigger", "150").load()
         .writeStream.format("parquet").option("path", sink + "/data")
         .option("checkpointLocation", sink + "/checkpoint")
         .trigger(processingTime="300 milliseconds").start())
query.awaitTermination()
"""


def env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("TIEREDSTORE_")},
            "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}


def start_writer(store: Path, done: Path) -> subprocess.Popen[bytes]:
    """:data:`WRITER` on a local store at ``store``, in a process of its own, noting
    each message it flushed in ``done``."""
    settings = {"backend": "local", "local_path": str(store), "local_fsync": False,
                "chunk_size": store_config(store).chunk_size, "group_commit_interval": 0.05}
    return subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(settings), str(done),
                             "24"], env=env())


def start_driver(store: Path, sink: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-c", DRIVER, str(store), str(sink)],
                                env=env(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def kill(driver: subprocess.Popen[bytes]) -> None:
    """SIGKILL the driver and its JVM (its own process group)."""
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()


def committed_batches(sink: Path) -> int:
    commits = sink / "checkpoint" / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def wait_for(what: Any, within: float, log: Path) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if what():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out; driver log:\n{log.read_text(errors='replace')[-3000:]}")


def test_sigkilled_driver_resumes_from_its_checkpoint_exactly_once(
        spark: Any, tmp_path: Path) -> None:
    store, sink, done, log = (tmp_path / "store", tmp_path / "sink", tmp_path / "flushed",
                              tmp_path / "driver.log")
    writer = start_writer(store, done)
    wait_for(done.exists, 60, log)
    driver = start_driver(store, sink, log)
    try:
        for target in (1, 3):  # killed after some batches, twice
            wait_for(lambda t=target: committed_batches(sink) >= t, 120, log)
            kill(driver)
            driver = start_driver(store, sink, log)
        assert writer.wait(120) == 0
        flushed = sorted(tuple(json.loads(line)) for line in done.read_text().splitlines())

        def caught_up() -> bool:
            offsets = sink / "checkpoint" / "commits"
            if not offsets.is_dir():
                return False
            got = spark.read.parquet(str(sink / "data")).count()
            return got >= len(flushed)

        wait_for(caught_up, 180, log)
    finally:
        kill(driver)
        if writer.poll() is None:
            writer.kill()
    rows = spark.read.parquet(str(sink / "data")).select(
        "broker", "topic", "queue_id", "offset").collect()
    got = sorted(tuple(r) for r in rows)
    assert len(got) == len(set(got)), "a message was written twice"
    assert got == flushed, (len(got), len(flushed))
    assert {k[0] for k in got} == {"broker-0", "broker-1"}  # a broker that came later
