"""export's proof: a driver SIGKILLed at random points, and two exports at once.

Each killed run is a process of its own that SIGKILLs itself a seeded random
time after a seeded random step (opened the table, took the queues' ends,
wrote its files, committed): in the middle of Spark's tasks writing files, of
the commit, or after it; each is followed by a rerun. The table, read by
delta-rs, then holds every stored message once. The oracle is what the test
appended (:class:`BuiltStore`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.servers import S3Server
from tests.spark.conftest import QUEUES, build_store, lake, moto_lake
from tests.spark.test_export import append_more, assert_each_once, table_rows
from tieredstore.spark import jobs
from tieredstore.spark.jobs.table import TableError

pytestmark = [pytest.mark.spark, pytest.mark.slow]

KILLED_AT_RANDOM = """
import json, os, signal, sys, threading
from tieredstore.spark import get_session, jobs

options, out, after, delay = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])

def step(done):
    print(done, flush=True)
    if done == after:  # the kill: a while after that step, wherever the run is then
        threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)).start()

spark = get_session("local[1]", app_name="killed-export",
                    conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
spark.sparkContext.setLogLevel("ERROR")
jobs.export(spark, options, out, on_step=step)
print("done", flush=True)
"""


STEPS = ("opened", "bounded", "written", "committed")


def export_killed_after(options: dict[str, str], out: str, after: str,
                        delay: float) -> list[str]:
    """An export in a process of its own, SIGKILLed ``delay`` s after step ``after``
    (or done before that): the steps it completed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_AT_RANDOM, json.dumps(options), out,
                             after, str(delay)], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        output, errors = proc.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):  # its JVM, orphaned by the kill
            os.killpg(proc.pid, signal.SIGKILL)
    steps = output.decode().split()
    assert proc.returncode in (0, -signal.SIGKILL), errors.decode(errors="replace")[-3000:]
    assert proc.returncode == -signal.SIGKILL or "done" in steps, steps
    return steps


def test_exports_killed_at_random_points_then_rerun_hold_each_message_once(
        spark: Any, tmp_path: Path) -> None:
    """A run per step, each with new messages, SIGKILLed a seeded random while
    after that step, each followed by a rerun: each message once after each."""
    built = build_store(tmp_path / "store", queues=(("t", 0), ("u", 1)), per_queue=30)
    out = str(tmp_path / "table")
    rng = random.Random(20261202)
    reached = []
    for run, after in enumerate(STEPS):
        append_more(built, 20, day=run + 1)
        # A commit takes a few tens of ms: kills after "written" land in it or after.
        delay = rng.uniform(0, 0.5 if after in ("opened", "bounded") else 0.02)
        steps = export_killed_after(built.options, out, after, delay)
        reached.append(f"{delay:.2f} s after {after}: {steps[-1] if steps else '-'}")
        if DeltaTable.is_deltatable(out):  # none before a first commit
            assert_each_once_of_some(spark, out, built)
        jobs.export(spark, built.options, out)
        assert_each_once(spark, out, built)
    print("killed after:", reached)


def test_an_export_to_s3_killed_then_rerun_holds_each_message_once(
        spark: Any, tmp_path: Path) -> None:
    """The same on moto: the table in a bucket, a run killed once its tasks have
    begun writing files there, and a rerun."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=40)
    with moto_lake(built.options) as (options, storage):
        killed_then_rerun(spark, built, options, storage, "s3://lake/tables/t", seed=7)


def test_an_export_to_seaweedfs_killed_then_rerun_holds_each_message_once(
        spark: Any, tmp_path: Path, seaweedfs: S3Server) -> None:
    """The same on SeaweedFS."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=40)
    bucket = f"lake-killed-{os.getpid()}"
    options, storage = lake(seaweedfs, built.options, bucket)
    killed_then_rerun(spark, built, options, storage, f"s3://{bucket}/tables/t", seed=8)


def killed_then_rerun(spark: Any, built: Any, options: dict[str, str],
                      storage: dict[str, str], out: str, *, seed: int) -> None:
    """An export of 40 messages, 25 more, a run SIGKILLed a seeded while after it
    took the queues' ends, and a rerun: the table (read by delta-rs) holds the
    65 once."""
    assert jobs.export(spark, options, out).rows == 40
    append_more(built, 25)
    export_killed_after(options, out, "bounded", random.Random(seed).uniform(0.5, 3))
    jobs.export(spark, options, out)
    got = DeltaTable(out, storage_options=storage).to_pyarrow_table(
        columns=["broker", "topic", "queue_id", "offset"]).to_pylist()
    keys = sorted((r["broker"], r["topic"], r["queue_id"], r["offset"]) for r in got)
    assert keys == sorted(("broker-0", "t", 0, i) for i in range(65))


def assert_each_once_of_some(spark: Any, out: str, built: Any) -> None:
    """What a killed run left: stored messages, each at most once (whole committed
    runs only: each queue's rows from its first offset up to some end)."""
    got = [r[:3] for r in table_rows(spark, out)]
    assert len(got) == len(set(got)), "a message twice"
    stored = {r[:3] for r in built.rows()}
    assert set(got) <= stored
    for key in {(t, q) for t, q, _ in got}:
        offsets = sorted(o for t, q, o in got if (t, q) == key)
        assert offsets == list(range(len(offsets))), (key, offsets[:5], len(offsets))


def race(spark: Any, options: dict[str, str], out: str,
         filters: tuple[jobs.Filters, jobs.Filters]) -> list[Any]:
    """Two exports started at once in two threads; both commit only once both
    have written their files (the race for one version). Each one's result or
    error."""
    both_written = threading.Barrier(2, timeout=120)
    results: list[Any] = [None, None]

    def run(i: int) -> None:
        def step(done: str) -> None:
            if done == "written":
                both_written.wait()
        try:
            results[i] = jobs.export(spark, options, out, filters[i], on_step=step)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return results


def test_of_two_exports_at_once_of_the_same_queues_one_wins_each_commit(
        spark: Any, tmp_path: Path) -> None:
    """Both read the same version and write the same ranges; one commits, the
    other's commit fails naming a queue the winner moved, and the table holds
    each message once; the loser's rerun finds nothing new."""
    built = build_store(tmp_path / "store", per_queue=25)
    out = str(tmp_path / "table")
    jobs.export(spark, built.options, out)
    append_more(built, 10)
    results = race(spark, built.options, out, (jobs.Filters(), jobs.Filters()))
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, Exception)]
    assert len(won) == 1 and len(lost) == 1, results
    assert won[0].rows == len(QUEUES) * 10
    assert isinstance(lost[0], TableError), lost[0]
    assert "another export committed tieredstore:" in str(lost[0])
    assert_each_once(spark, out, built)
    assert jobs.export(spark, built.options, out).rows == 0


def test_of_two_exports_at_once_of_other_queues_both_land(spark: Any,
                                                          tmp_path: Path) -> None:
    """Exports of two topics racing for one version: the loser's commit moved no
    queue of the winner's, so it is made again on the newer version."""
    built = build_store(tmp_path / "store", per_queue=25)
    out = str(tmp_path / "table")
    jobs.export(spark, built.options, out)
    append_more(built, 10)
    results = race(spark, built.options, out, (jobs.Filters(topics=("orders",)),
                                               jobs.Filters(topics=("audit",))))
    assert [r.rows for r in results] == [30, 10], results
    assert sorted(r.sequence for r in results) == [1, 2]
    assert_each_once(spark, out, built)
