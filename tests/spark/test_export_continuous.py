"""export --continuous: a streaming query into the export table, each micro-batch
committed once (Delta application transaction ``tieredstore-stream:<query id>``
= batch id), read back by delta-rs; the oracle is what the tests appended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.spark.conftest import build_store, moto_lake, store_config
from tests.spark.test_export import B0, append_more, assert_each_once, table_rows
from tests.spark.test_stream import append, expire
from tieredstore.cli import main as cli_main
from tieredstore.errors import ConfigError
from tieredstore.spark import jobs
from tieredstore.spark.jobs.continuous import (
    CHECKPOINT_DIR,
    STREAM_APP_PREFIX,
    BatchResult,
    processing_time,
)
from tieredstore.spark.jobs.table import app_id, table_location

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def run_available_now(spark: Any, options: dict[str, str], out: Path | str,
                      **kwargs: Any) -> list[BatchResult]:
    """A continuous export with Trigger.AvailableNow, to its end; its batches."""
    got: list[BatchResult] = []
    query = jobs.export_continuous(spark, options, str(out), available_now=True,
                                   report=got.append, **kwargs)
    query.awaitTermination()
    assert query.exception() is None, query.exception()
    return got


def test_a_continuous_export_goes_on_from_a_batch_runs_table_each_batch_once(
        spark: Any, tmp_path: Path) -> None:
    """A batch run first; the continuous export's new checkpoint starts at the
    table's ends, commits each micro-batch with its query's transaction, and a
    restart from its checkpoint exports only what came since."""
    built = build_store(tmp_path / "store", queues=(("t", 0), ("u", 1)), per_queue=40)
    out = tmp_path / "table"
    assert jobs.export(spark, built.options, str(out)).rows == 80
    append_more(built, 30)

    batches = run_available_now(spark, built.options, out, max_messages=25)
    assert sum(b.rows for b in batches) == 60 and len(batches) >= 3
    assert all(b.version is not None for b in batches if b.rows)
    assert_each_once(spark, out, built)
    table = DeltaTable(str(out))
    assert table.transaction_version(app_id(B0, "u", 1)) == 70
    query = json.loads((out / CHECKPOINT_DIR / "metadata").read_text())["id"]
    assert table.transaction_version(STREAM_APP_PREFIX + query) == batches[-1].batch
    info = json.loads(table.history(1)[0]["tieredstore"])
    assert (info["query"], info["batch"]) == (query, batches[-1].batch)

    append_more(built, 5, day=2)
    again = run_available_now(spark, built.options, out)
    assert sum(b.rows for b in again) == 10
    assert_each_once(spark, out, built)
    # A batch export now finds nothing new: the ends moved with the batches.
    assert jobs.export(spark, built.options, str(out)).rows == 0


def test_a_replayed_micro_batch_commits_nothing(spark: Any, tmp_path: Path) -> None:
    """The kill after the Delta commit, before Spark's checkpoint commit: Spark
    replays the batch (here: its commit record removed); the table's
    transaction says it is in, so the replay does nothing."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=30)
    out = tmp_path / "table"
    first = run_available_now(spark, built.options, out)
    assert [b.rows for b in first] == [30]
    version = DeltaTable(str(out)).version()
    commits = out / CHECKPOINT_DIR / "commits"
    for name in (str(first[0].batch), f".{first[0].batch}.crc"):
        (commits / name).unlink()

    replay = run_available_now(spark, built.options, out)
    assert [(b.batch, b.replayed, b.version) for b in replay] == [(first[0].batch, True, None)]
    assert DeltaTable(str(out)).version() == version
    assert_each_once(spark, out, built)


def test_a_continuous_export_refuses_rows_another_export_wrote(spark: Any,
                                                               tmp_path: Path) -> None:
    """A checkpoint behind the table (a batch export moved the queue's end since):
    the batch fails naming the queue and commits nothing."""
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=10)
    out = tmp_path / "table"
    run_available_now(spark, built.options, out)
    append_more(built, 5)
    assert jobs.export(spark, built.options, str(out)).rows == 5
    append_more(built, 5, day=2)
    query = jobs.export_continuous(spark, built.options, str(out), available_now=True)
    with pytest.raises(Exception, match=r"broker-0/t/0: offsets from 10 are in the table "
                                        r"already \(up to 15\): another export"):
        query.awaitTermination()
    assert len(table_rows(spark, out)) == 15


def test_the_continuous_options_are_checked_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert processing_time("30s") == "30 seconds"
    assert processing_time("1m") == "1 minutes"
    assert processing_time("500ms") == "500 milliseconds"
    assert processing_time(" 2 Minutes ") == "2 minutes"
    with pytest.raises(ConfigError, match=r"trigger.*30s, 1m"):
        processing_time("soon")
    with pytest.raises(ConfigError, match="needs --checkpoint"):
        from tieredstore.spark.jobs.continuous import checkpoint_location
        checkpoint_location(table_location("s3://b/t", build_store(
            tmp_path / "s", queues=(), per_queue=0).config), None)
    base = ["spark", "export", "--data-dir", str(tmp_path), "--output", str(tmp_path / "t")]
    assert cli_main([*base, "--trigger", "1m"]) == 2
    assert "--trigger goes with --continuous" in capsys.readouterr().err
    assert cli_main([*base, "--continuous", "--trigger", "1m", "--available-now"]) == 2
    assert "choose one" in capsys.readouterr().err
    assert cli_main([*base, "--continuous", "--trigger", "soon"]) == 2
    assert "--trigger: must be an interval" in capsys.readouterr().err


def test_messages_retention_removed_before_their_export_are_skipped(
        spark: Any, tmp_path: Path) -> None:
    """As a batch run: the query goes on past offsets retention removed unexported
    (a WARNING counts them) rather than stopping for good."""
    config = store_config(tmp_path / "store")
    first = append(config, "t", 0, 30, size=1000)
    out = tmp_path / "table"
    options = {"path": str(tmp_path / "store")}
    assert sum(b.rows for b in run_available_now(spark, options, out)) == 30
    later = append(config, "t", 0, 170, size=1000)
    lowest = expire(config, "t", 0)
    assert lowest > 30, lowest
    run_available_now(spark, options, out)
    rows = DeltaTable(str(out)).to_pyarrow_table(columns=["broker", "topic", "queue_id",
                                                          "offset"]).to_pylist()
    got = sorted((r["broker"], r["topic"], r["queue_id"], r["offset"]) for r in rows)
    assert got == sorted(first | {k for k in later if k[3] >= lowest})


def test_a_continuous_export_to_s3_commits_in_the_bucket(spark: Any, tmp_path: Path) -> None:
    """An s3:// table (moto) with a local checkpoint: each micro-batch's files are
    written into the bucket and committed there; delta-rs reads them back."""
    built = build_store(tmp_path / "store", queues=(("t", 0), ("u", 0)), per_queue=12)
    with moto_lake(built.options) as (options, storage):
        batches = run_available_now(spark, options, "s3://lake/t", max_messages=10,
                                    checkpoint=str(tmp_path / "checkpoint"))
        assert sum(b.rows for b in batches) == 24 and len(batches) >= 3
        got = DeltaTable("s3://lake/t", storage_options=storage).to_pyarrow_table().to_pylist()
    assert sorted((r["topic"], r["offset"]) for r in got) == sorted(
        (t, i) for t in ("t", "u") for i in range(12))


def test_the_command_prints_a_json_line_per_micro_batch(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    built = build_store(tmp_path / "store", queues=(("t", 0),), per_queue=20)
    out = tmp_path / "table"
    assert cli_main(["spark", "export", "--data-dir", str(built.path), "--output", str(out),
                     "--continuous", "--available-now", "--max-messages-per-batch", "7",
                     "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["batch"], d["rows"], d["queues"], d["replayed"]) for d in lines] == [
        (0, 7, 1, False), (1, 7, 1, False), (2, 6, 1, False)]
    assert [d["version"] for d in lines] == [0, 1, 2]
    assert {d["table"] for d in lines} == {str(out)}
    assert_each_once(spark, out, built)
