"""export: an incremental, exactly-once Parquet table of the store's queues.

Each run appends what is past the last commit; a run killed (SIGKILL, in a
process of its own) at a chosen step is finished or redone by the next run,
and the table then holds every message of the store once. The oracle is what
the tests appended (:class:`BuiltStore`), not the code under test.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import QUEUES, T0, BuiltStore, Written, build_store
from tests.spark.test_read import assert_same, rows_of
from tieredstore.cli import main as cli_main
from tieredstore.errors import ConfigError
from tieredstore.spark import jobs
from tieredstore.spark.table import TableBusy, TableError
from tieredstore.store import MessageStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAY_MS = 86_400_000
B0 = "broker-0"  # the stores' one broker
FIRST = 100  # per queue: one sealed consume-queue segment of 64 and a tail of 36


def append_more(built: BuiltStore, count: int, *, day: int = 1) -> None:
    """``count`` more messages on each queue, stored ``day`` days after the first ones."""
    with MessageStore.open(built.config) as store:
        for (topic, queue_id), written in built.messages.items():
            for _ in range(count):
                i = len(written)
                body = f"{topic}/{queue_id}/{i}".encode() * (i % 7)
                ts = T0 + day * DAY_MS + i * 1000
                offset = store.append(topic, queue_id, body, keys=(f"k{i}",), tags=None,
                                      properties={"i": str(i)}, timestamp=ts)
                assert offset == i
                written.append(Written(i, body, ts, (f"k{i}",), None, {"i": str(i)}))


def table_rows(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    return rows_of(spark.read.parquet(str(out)))


def assert_each_once(spark: Any, out: Path, built: BuiltStore) -> None:
    """The table holds every message of the store, each (topic, queue, offset) once."""
    got = table_rows(spark, out)
    twice = [k for k, n in Counter(r[:3] for r in got).items() if n > 1]
    assert not twice, f"exported more than once: {twice[:5]}"
    assert_same(got, built.rows())


def visible_files(out: Path) -> set[str]:
    return {str(p.relative_to(out)) for p in out.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(out).parts)}


def test_export_twice_appends_only_the_new_messages(spark: Any, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    built = build_store(tmp_path / "store", per_queue=FIRST)
    out = tmp_path / "table"

    first = jobs.export(spark, built.options, str(out))
    assert (first.rows, first.sequence) == (len(QUEUES) * FIRST, 1)
    assert_each_once(spark, out, built)
    files_first = visible_files(out)
    assert {f.rsplit("/", 1)[0] for f in files_first} == {
        "broker=broker-0/topic=orders/date=2023-11-14",
        "broker=broker-0/topic=audit/date=2023-11-14"}
    table = spark.read.parquet(str(out))
    assert table.columns == ["queue_id", "offset", "store_timestamp", "keys", "tags",
                             "properties", "body", "broker", "topic", "date"]

    # 60 more per queue, a day later: the consume queue rolls at 128 (segment 2).
    append_more(built, 60)
    second = jobs.export(spark, built.options, str(out))
    assert (second.rows, second.sequence) == (len(QUEUES) * 60, 2)
    assert second.ranges == tuple(sorted((B0, t, q, FIRST, FIRST + 60) for t, q in QUEUES))
    assert visible_files(out) > files_first, "the first run's files were not kept as they were"
    assert_each_once(spark, out, built)

    # The table reads natively, pruned by partition: only audit's files of the new day.
    day2 = spark.read.parquet(str(out)).where("topic = 'audit' AND date = '2023-11-15'")
    assert day2.count() == 60
    plan = day2._jdf.queryExecution().executedPlan().toString()
    pruned = re.search(r"PartitionFilters: \[([^\]]*)\]", plan)
    assert pruned and "audit" in pruned[1] and "date" in pruned[1], plan

    # Nothing new: nothing written, exit status 0, a message.
    before = (visible_files(out), sorted(os.listdir(out / "_commits")))
    assert cli_main(["spark", "export", "--data-dir", str(built.path), "--output",
                     out.as_uri()]) == 0
    assert "nothing new to export" in capsys.readouterr().out
    assert (visible_files(out), sorted(os.listdir(out / "_commits"))) == before

    # A topic selected alone moves on alone; the others' offsets are kept.
    append_more(built, 5, day=2)
    third = jobs.export(spark, built.options, str(out), jobs.Filters(topics=("audit",)))
    assert third.ranges == ((B0, "audit", 0, FIRST + 60, FIRST + 65),)
    fourth = jobs.export(spark, built.options, str(out))
    assert {r[1:3] for r in fourth.ranges} == {("orders", 0), ("orders", 1), ("orders", 2)}
    assert_each_once(spark, out, built)


def test_a_run_exports_up_to_the_ends_it_took_at_its_start(spark: Any,
                                                           tmp_path: Path) -> None:
    """Messages appended while a run is under way wait for the next run."""
    built = build_store(tmp_path / "store", queues=(("t", 0), ("t", 1)), per_queue=FIRST)
    out = tmp_path / "table"

    def append_once_bounded(step: str) -> None:
        if step == "bounded":
            append_more(built, 30)

    first = jobs.export(spark, built.options, str(out), on_step=append_once_bounded)
    assert first.ranges == ((B0, "t", 0, 0, FIRST), (B0, "t", 1, 0, FIRST))
    assert len(table_rows(spark, out)) == 2 * FIRST
    second = jobs.export(spark, built.options, str(out))
    assert second.ranges == ((B0, "t", 0, FIRST, FIRST + 30), (B0, "t", 1, FIRST, FIRST + 30))
    assert_each_once(spark, out, built)


KILLED_RUN = """
import os, signal, sys
from tieredstore.spark import get_session, jobs

store, out, step = sys.argv[1:4]

def crash(done):
    if done.startswith(step):
        os.kill(os.getpid(), signal.SIGKILL)

spark = get_session("local[1]", app_name="killed-export",
                    conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
jobs.export(spark, {"path": store}, out, on_step=crash)
sys.exit(3)
"""


def export_killed_at(store: Path, out: Path, step: str) -> None:
    """Run an export in a process of its own, SIGKILLed once ``step`` is done."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(store), str(out), step],
                            env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        output, _ = proc.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):  # its JVM, orphaned by the kill
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, output.decode(errors="replace")[-3000:]


# Through Spark: a kill after the first move (partly visible, rolled forward).
# tests/spark/test_table.py kills a run at every filesystem call of the
# protocol (before the commit: rolled back), and its recovery at every call,
# without Spark; the step list stays for a run of the others by hand.
@pytest.mark.parametrize("step", ["moved "])
def test_an_export_killed_at_any_step_is_finished_by_the_next(spark: Any, tmp_path: Path,
                                                               step: str) -> None:
    built = build_store(tmp_path / "store", per_queue=FIRST)
    out = tmp_path / "table"
    jobs.export(spark, built.options, str(out))
    shown = table_rows(spark, out)
    append_more(built, 40)

    export_killed_at(built.path, out, step)
    after_kill = table_rows(spark, out)
    if step == "staged":  # not committed: nothing new visible
        assert after_kill == shown
        assert sorted(os.listdir(out / "_commits")) == [f"{1:020d}.json"]
    else:  # committed: what is visible is a part of the run, each message once
        keys = [r[:3] for r in after_kill]
        assert {r[:3] for r in shown} <= set(keys) <= {r[:3] for r in built.rows()}
        assert len(keys) == len(set(keys))
        if step == "moved ":
            assert len(after_kill) > len(shown)
    assert os.listdir(out / "_staging"), "the killed run left no staging to recover"

    rerun = jobs.export(spark, built.options, str(out))
    assert_each_once(spark, out, built)
    assert not os.listdir(out / "_staging")
    # Redone (not committed before the kill) or finished (committed, then moved).
    assert rerun.rows == (len(QUEUES) * 40 if step == "staged" else 0)


def test_a_second_export_is_refused_while_one_runs(spark: Any, tmp_path: Path) -> None:
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=10)
    out = tmp_path / "table"
    out.mkdir()
    with open(out / "_export.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(TableBusy, match="another export is running"):
            jobs.export(spark, built.options, str(out))
    assert not (out / "_commits").exists()
    assert jobs.export(spark, built.options, str(out)).rows == 10


def test_export_refuses_what_it_cannot_do_exactly_once(spark: Any, tmp_path: Path) -> None:
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=3)
    with pytest.raises(ConfigError, match="local directory or file:// URI, not s3a://"):
        jobs.export(spark, built.options, "s3a://bucket/table")
    with pytest.raises(ConfigError, match=r"offset_from.*topic and queue id only"):
        jobs.export(spark, built.options, str(tmp_path / "t"), jobs.Filters(offset_from=1))
    other = build_store(tmp_path / "other", queues=(("t", 0),), per_queue=3,
                        broker="broker-9")
    jobs.export(spark, built.options, str(tmp_path / "t"))
    with pytest.raises(TableError, match="holds the queues of store"):
        jobs.export(spark, {**other.options, "broker": "broker-9"}, str(tmp_path / "t"))


def test_the_reader_reads_each_queue_in_its_own_range(spark: Any,
                                                      merged_store: BuiltStore) -> None:
    """Option ``queue_offsets`` (what export reads with): only the queues it names,
    each within its own offsets, across sealed segments and the tail."""
    ranges = [["orders", 1, 60, 200], ["audit", 0, 0, 3], ["orders", 2, 219, 220]]
    df = spark.read.format("tieredstore").options(
        **merged_store.options, queue_offsets=json.dumps([[B0, *r] for r in ranges])).load()
    want = sorted(r for t, q, lo, hi in ranges
                  for r in merged_store.rows(topic=t, queue_id=q, lo=lo, hi=hi))
    assert_same(rows_of(df), want)
    with pytest.raises(Exception, match=r"queue_offsets.*JSON list"):
        spark.read.format("tieredstore").options(**merged_store.options,
                                                 queue_offsets='[["t", 0, 1, 2]]').load().count()


def test_a_table_whose_path_has_a_space_or_percent_gets_its_rows(spark: Any,
                                                                 tmp_path: Path) -> None:
    """The staging directory Spark writes is the one the commit lists (a URI's
    escapes are not taken for the path's own characters)."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=10)
    out = tmp_path / "my table 100%"
    result = jobs.export(spark, built.options, str(out))
    assert result.rows == 10 and len(result.ranges) == 1
    assert visible_files(out), "the commit names no file: the run's rows are lost"
    assert_each_once(spark, out, built)
    assert sorted(os.listdir(tmp_path)) == ["my table 100%", "store"]


ODD_TOPICS = ("a=b", "50%", "007", "x y", "ü:#?", "_u", "*[x]", "-1")


def test_topics_with_odd_names_export_each_message_once_under_any_session_zone(
        spark: Any, tmp_path: Path) -> None:
    """Topic names Hive layout escapes ('=', '%', ':'), or that look like numbers,
    or like a hidden file, or a glob; the date is the UTC day whatever the
    session's time zone (T0 is 22:13 UTC: the next day in Tokyo)."""
    built = build_store(tmp_path / "store", queues=tuple((t, 0) for t in ODD_TOPICS),
                        per_queue=5)
    out = tmp_path / "table"
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    try:
        first = jobs.export(spark, built.options, str(out))
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert first.rows == 5 * len(ODD_TOPICS)
    got = spark.read.schema("queue_id int, offset long, topic string, date date") \
        .parquet(str(out)).collect()
    assert sorted((r.topic, r.queue_id, r.offset) for r in got) == sorted(
        (t, 0, i) for t in ODD_TOPICS for i in range(5))
    assert {str(r.date) for r in got} == {"2023-11-14"}
    append_more(built, 2)
    assert jobs.export(spark, built.options, str(out)).rows == 2 * len(ODD_TOPICS)


def test_a_table_refuses_another_store_with_the_same_prefix_cluster_and_broker(
        spark: Any, tmp_path: Path) -> None:
    """Two buckets (here: two local stores) with the default key prefix, cluster
    and broker are two stores: the second's messages past the first's offsets
    were appended to the table as if they were the first's."""
    first = build_store(tmp_path / "first", queues=(("t", 0),), per_queue=3)
    second = build_store(tmp_path / "second", queues=(("t", 0),), per_queue=8, seed=9)
    out = tmp_path / "table"
    jobs.export(spark, first.options, str(out))
    with pytest.raises(TableError, match="holds the queues of store"):
        jobs.export(spark, second.options, str(out))
    assert len(table_rows(spark, out)) == 3


def test_a_table_whose_path_has_glob_characters_gets_its_rows(spark: Any,
                                                              tmp_path: Path) -> None:
    """'[1]' in the table's path is a name, not a pattern, when the run checks
    what it staged."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=4)
    (tmp_path / "t1").mkdir()  # what the pattern 't[1]' would match
    out = tmp_path / "t[1]"
    assert jobs.export(spark, built.options, str(out)).rows == 4
    assert len(visible_files(out)) >= 1 and not os.listdir(tmp_path / "t1")


@pytest.mark.parametrize("odd", ["__HIVE_DEFAULT_PARTITION__", "#" * 100])
def test_a_topic_hive_layout_cannot_hold_is_named_and_the_others_still_export(
        spark: Any, tmp_path: Path, odd: str) -> None:
    """Spark reads the directory ``topic=__HIVE_DEFAULT_PARTITION__`` back as a
    null topic, and cannot create ``topic=%23%23...`` past 255 bytes: such a
    topic is refused by name, and a run without it exports the rest."""
    built = build_store(tmp_path / "store", queues=((odd, 0), ("t", 0)), per_queue=3)
    out = tmp_path / "table"
    with pytest.raises(TableError, match=re.escape(repr(odd)[:40])):
        jobs.export(spark, built.options, str(out))
    assert jobs.export(spark, built.options, str(out), jobs.Filters(topics=("t",))).rows == 3
