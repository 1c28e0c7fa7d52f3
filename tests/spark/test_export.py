"""export: an incremental, exactly-once Delta Lake table of the store's queues.

Each run appends what is past the table's exported end offsets; a run killed
(SIGKILL, in a process of its own) or failing before its commit is redone by
the next run, and the table, read by delta-rs, then holds every message once. The oracle is what
the tests appended (:class:`BuiltStore`), not the code under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.servers import S3Server
from tests.spark.conftest import QUEUES, T0, BuiltStore, Written, build_store, lake, moto_lake
from tests.spark.test_read import assert_same, rows_of
from tieredstore.cli import main as cli_main
from tieredstore.errors import ConfigError
from tieredstore.spark import jobs
from tieredstore.spark.jobs.table import TableError, app_id
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
    """The table's rows as Delta's own reader (delta-rs) reads them, in
    ``rows_of``'s shape."""
    del spark
    data = DeltaTable(str(out)).to_pyarrow_table().to_pylist()
    return sorted((r["topic"], r["queue_id"], r["offset"],
                   round(r["store_timestamp"].timestamp() * 1000), list(r["keys"] or ()),
                   r["tags"], dict(r["properties"] or {}), r["body"]) for r in data)


def assert_each_once(spark: Any, out: Path, built: BuiltStore) -> None:
    """The table holds every message of the store, each (topic, queue, offset) once."""
    got = table_rows(spark, out)
    twice = [k for k, n in Counter(r[:3] for r in got).items() if n > 1]
    assert not twice, f"exported more than once: {twice[:5]}"
    assert_same(got, built.rows())


def test_export_twice_appends_only_the_new_messages(spark: Any, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    built = build_store(tmp_path / "store", per_queue=FIRST)
    out = tmp_path / "table"

    first = jobs.export(spark, built.options, str(out))
    assert (first.rows, first.sequence) == (len(QUEUES) * FIRST, 0)
    assert_each_once(spark, out, built)
    table = DeltaTable(str(out))
    assert table.metadata().partition_columns == ["topic", "date"]
    assert table.schema().to_arrow().names == [
        "broker", "queue_id", "offset", "store_timestamp", "keys", "tags", "properties",
        "body", "topic", "date"]
    assert {p.rsplit("/", 1)[0] for p in table.file_uris()} == {
        f"{out}/topic=orders/date=2023-11-14", f"{out}/topic=audit/date=2023-11-14"}
    assert table.transaction_version(app_id(B0, "orders", 1)) == FIRST

    # 60 more per queue, a day later: the consume queue rolls at 128 (segment 2).
    append_more(built, 60)
    second = jobs.export(spark, built.options, str(out))
    assert (second.rows, second.sequence) == (len(QUEUES) * 60, 1)
    assert second.ranges == tuple(sorted((B0, t, q, FIRST, FIRST + 60) for t, q in QUEUES))
    assert_each_once(spark, out, built)
    assert DeltaTable(str(out)).to_pyarrow_table(
        filters=[("topic", "=", "audit"), ("date", "=", date(2023, 11, 15))]).num_rows == 60

    # Nothing new: nothing committed, exit status 0, a message.
    assert cli_main(["spark", "export", "--data-dir", str(built.path), "--output",
                     out.as_uri()]) == 0
    assert "nothing new to export" in capsys.readouterr().out
    assert DeltaTable(str(out)).version() == 1

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
    if done == step:
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


def test_an_export_killed_before_its_commit_shows_nothing_and_the_rerun_exports_once(
        spark: Any, tmp_path: Path) -> None:
    """SIGKILL of the driver once its data files are written: they are in no
    commit, so the table shows the first run's rows only; the rerun exports the
    killed run's ranges, each message once."""
    built = build_store(tmp_path / "store", per_queue=FIRST)
    out = tmp_path / "table"
    jobs.export(spark, built.options, str(out))
    shown = table_rows(spark, out)
    files = set(out.rglob("*.parquet"))
    append_more(built, 40)

    export_killed_at(built.path, out, "written")
    assert set(out.rglob("*.parquet")) > files, "the killed run wrote no file"
    assert table_rows(spark, out) == shown
    assert DeltaTable(str(out)).version() == 0

    rerun = jobs.export(spark, built.options, str(out))
    assert rerun.rows == len(QUEUES) * 40
    assert_each_once(spark, out, built)


@pytest.mark.parametrize("step", ["opened", "bounded", "written", "committed"])
def test_an_export_failing_at_a_step_is_redone_or_done(spark: Any, tmp_path: Path,
                                                       step: str) -> None:
    """A run that fails after a step (an exception in the driver): before its commit,
    nothing of it is visible and the next run exports its ranges; after, the next
    run finds nothing new."""
    built = build_store(tmp_path / "store", queues=(("t", 0), ("u", 1)), per_queue=12)
    out = tmp_path / "table"

    def fail(done: str) -> None:
        if done == step:
            raise RuntimeError(f"failed after {done}")

    with pytest.raises(RuntimeError, match=step):
        jobs.export(spark, built.options, str(out), on_step=fail)
    committed = step == "committed"
    assert (len(table_rows(spark, out)) if committed else 0) == (24 if committed else 0)
    assert jobs.export(spark, built.options, str(out)).rows == (0 if committed else 24)
    assert_each_once(spark, out, built)


def test_of_two_exports_committing_at_once_one_wins(spark: Any, tmp_path: Path) -> None:
    """A run that another committed before (here: a second export run between this
    run's read of the table and its commit) fails its commit; the table holds
    each message once, and the next run finds nothing new."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=10)
    out = tmp_path / "table"
    jobs.export(spark, built.options, str(out))
    append_more(built, 5)

    def race(done: str) -> None:
        if done == "written":
            assert jobs.export(spark, built.options, str(out)).rows == 5

    with pytest.raises(TableError, match=r"commit of run .* failed"):
        jobs.export(spark, built.options, str(out), on_step=race)
    assert_each_once(spark, out, built)
    assert jobs.export(spark, built.options, str(out)).rows == 0


def test_export_refuses_what_it_cannot_do_exactly_once(spark: Any, tmp_path: Path) -> None:
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=3)
    with pytest.raises(ConfigError, match="local path, a file:// URI or s3://bucket/path"):
        jobs.export(spark, built.options, "hdfs://nn/table")
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


def test_a_table_whose_path_has_a_space_percent_or_glob_gets_its_rows(
        spark: Any, tmp_path: Path) -> None:
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=10)
    out = tmp_path / "my table 100% [1]"
    result = jobs.export(spark, built.options, str(out))
    assert result.rows == 10 and len(result.ranges) == 1
    assert_each_once(spark, out, built)
    assert sorted(os.listdir(tmp_path)) == ["my table 100% [1]", "store"]


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
    got = DeltaTable(str(out)).to_pyarrow_table(columns=["topic", "queue_id", "offset",
                                                          "date"]).to_pylist()
    assert sorted((r["topic"], r["queue_id"], r["offset"]) for r in got) == sorted(
        (t, 0, i) for t in ODD_TOPICS for i in range(5))
    assert {str(r["date"]) for r in got} == {"2023-11-14"}
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


def test_an_export_to_s3_commits_in_the_bucket(spark: Any, tmp_path: Path) -> None:
    """OUT = s3://bucket/path: the executors write the data files into the bucket and
    the driver commits there, with the store's S3 settings (here a local store's
    options naming the table's endpoint and keys); read back by delta-rs."""
    with moto_lake({}) as (options, storage):
        exports_twice_into(spark, tmp_path, options, storage, "s3://lake/tables/t")


def test_an_export_to_seaweedfs_commits_in_the_bucket(
        spark: Any, tmp_path: Path, seaweedfs: S3Server) -> None:
    """The same on SeaweedFS, whose conditional writes delta-rs's commit relies on."""
    options, storage = lake(seaweedfs, {}, f"lake-{os.getpid()}")
    exports_twice_into(spark, tmp_path, options, storage, f"s3://lake-{os.getpid()}/tables/t")


def test_a_table_elsewhere_than_the_store_takes_the_output_flags(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--output-endpoint`` and ``--output-config`` (the table's credentials) for an
    s3:// table while the store is a local directory with no S3 settings: the
    run lands in that bucket; ``tieredstore table optimize`` takes the same flags."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=5)
    with moto_lake({}) as (options, storage):
        settings = tmp_path / "lake.toml"
        settings.write_text(f'[s3]\ns3_access_key_id = "{options["s3_access_key_id"]}"\n'
                            f's3_secret_access_key = "{options["s3_secret_access_key"]}"\n'
                            's3_region = "us-east-1"\n')
        flags = ["--output-endpoint", options["s3_endpoint_url"],
                 "--output-config", str(settings)]
        capsys.readouterr()
        assert cli_main(["spark", "export", "--data-dir", str(built.path), "--output",
                         "s3://lake/t", *flags, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["rows"] == 5
        assert cli_main(["table", "optimize", "s3://lake/t", *flags, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["table"] == "s3://lake/t"
        got = DeltaTable("s3://lake/t", storage_options=storage).to_pyarrow_table().to_pylist()
    assert sorted(r["offset"] for r in got) == list(range(5))
    assert options["s3_secret_access_key"] not in capsys.readouterr().err


def exports_twice_into(spark: Any, tmp_path: Path, s3: dict[str, str],
                       storage: dict[str, str], out: str) -> None:
    """Two exports into ``out`` (the table's bucket named by the options ``s3``),
    the second of only the new messages; the table read back by delta-rs."""
    built = build_store(tmp_path / "store", queues=(("t", 0), ("u", 0)), per_queue=6)
    options = {**built.options, **s3}
    assert jobs.export(spark, options, out).rows == 12
    append_more(built, 2)
    assert jobs.export(spark, options, out).rows == 4
    got = DeltaTable(out, storage_options=storage).to_pyarrow_table().to_pylist()
    assert sorted((r["topic"], r["offset"]) for r in got) == sorted(
        (t, i) for t in ("t", "u") for i in range(8))


def test_export_cuts_its_files_at_the_target_size(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--target-file-size``: a task's rows of one partition in more files than
    one, each about the target at most, every message once."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=200)
    out = tmp_path / "table"
    assert cli_main(["spark", "--master", "local[2]", "export", "--data-dir", str(built.path),
                     "--output", str(out), "--target-file-size", "16KiB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 200
    sizes = [os.path.getsize(p) for p in DeltaTable(str(out)).file_uris()]
    assert len(sizes) >= 3 and max(sizes) <= 32 * 1024, sizes
    assert_each_once(spark, out, built)
