"""The export table on its own (no Spark): where it lives, its data files, and its
Delta commit carrying each queue's end offset; read back with delta-rs."""

from __future__ import annotations

import datetime
import importlib
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from deltalake import DeltaTable

from tests.spark.conftest import store_config
from tieredstore.cli import main as cli_main
from tieredstore.errors import ConfigError
from tieredstore.spark.jobs.table import (
    TABLE_SCHEMA,
    Location,
    TableError,
    commit,
    exported_end,
    open_table,
    partition_dir,
    table_access,
    table_location,
    table_source,
    write_files,
)

T0_US = 1_700_000_000_000_000
TOPICS = ("orders", "a=b", "50%", "ü:#?", "_hidden")


def batch(lo: int, hi: int) -> pa.RecordBatch:
    """Rows of each topic's queue 0, offsets [lo, hi), as a task gets them."""
    schema = pa.schema([(f.name, pa.int64() if f.name == "store_timestamp" else f.type)
                        for f in TABLE_SCHEMA])
    return pa.RecordBatch.from_pylist([
        {"broker": "b0", "topic": t, "queue_id": 0, "offset": i,
         "store_timestamp": T0_US + i, "keys": [f"k{i}"], "tags": None,
         "properties": {"i": str(i)}, "body": b"x" * i,
         "date": datetime.date(2023, 11, 14)}
        for t in TOPICS for i in range(lo, hi)], schema=schema)


def identities(where: Location) -> list[tuple[str, int]]:
    rows = DeltaTable(where.uri).to_pyarrow_table(columns=["topic", "offset"]).to_pylist()
    return sorted((r["topic"], r["offset"]) for r in rows)


def test_a_commit_shows_its_files_and_moves_the_queues_end_offsets(tmp_path: Path) -> None:
    where = table_location(str(tmp_path / "t"), store_config(tmp_path / "s"))
    assert open_table(where) is None
    files = write_files(where, "r1", 0, iter([batch(0, 3)]))
    assert sorted(f.topic for f in files) == sorted(TOPICS)
    assert open_table(where) is None, "files written before the first commit made a table"
    ends = {("b0", t, 0): 3 for t in TOPICS}
    assert commit(where, None, "src", files, ends=ends, info={"run": "r1"}) == 0
    table = open_table(where)
    assert table_source(table) == "src"
    assert {t: exported_end(table, "b0", t, 0) for t in TOPICS} == dict.fromkeys(TOPICS, 3)
    assert exported_end(table, "b0", "orders", 1) is None
    assert identities(where) == sorted((t, i) for t in TOPICS for i in range(3))

    # Files written and not committed are not the table's.
    write_files(where, "r2", 0, iter([batch(3, 5)]))
    assert identities(where) == sorted((t, i) for t in TOPICS for i in range(3))
    got = DeltaTable(where.uri).to_pyarrow_table(filters=[("topic", "=", "ü:#?")])
    assert got.column("properties").to_pylist()[0] == [("i", "0")]


def test_of_two_commits_based_on_one_version_the_second_fails(tmp_path: Path) -> None:
    """Two writers that read the same version: one commits, the other's commit
    fails (delta-rs's conditional create of the log entry, no retry), so no
    queue's range is committed twice."""
    where = table_location(str(tmp_path / "t"), store_config(tmp_path / "s"))
    commit(where, None, "src", write_files(where, "r1", 0, iter([batch(0, 2)])),
           ends={("b0", "orders", 0): 2}, info={})
    one, two = open_table(where), open_table(where)
    ends = {("b0", "orders", 0): 4}
    commit(where, one, "src", write_files(where, "r2", 0, iter([batch(2, 4)])),
           ends=ends, info={})
    with pytest.raises(Exception, match="commit"):
        commit(where, two, "src", write_files(where, "r3", 0, iter([batch(2, 4)])),
               ends=ends, info={})
    assert identities(where) == sorted((t, i) for t in TOPICS for i in range(4))
    assert exported_end(open_table(where), "b0", "orders", 0) == 4


def test_partition_directories_are_plain_names() -> None:
    assert partition_dir("orders", "2023-11-14") == "topic=orders/date=2023-11-14"
    odd = {partition_dir(t, "d") for t in ("a=b", "a_b", "a/b", "..", "_x", "ü")}
    assert len(odd) == 6
    assert all(re.fullmatch(r"topic=[A-Za-z0-9._-]+/date=d", d) for d in odd), odd


def test_table_locations(tmp_path: Path) -> None:
    config = store_config(tmp_path / "s")
    assert table_location((tmp_path / "a b").as_uri(), config).uri == str(tmp_path / "a b")
    s3 = table_location("s3://bucket/some/table/", config.replace(
        s3_endpoint_url="http://127.0.0.1:9000", s3_access_key_id="AK",
        s3_secret_access_key="SK", s3_region="eu-west-1"))
    assert s3.uri == "s3://bucket/some/table"
    assert s3.storage_options == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                                  "AWS_ALLOW_HTTP": "true", "AWS_REGION": "eu-west-1",
                                  "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}
    for bad, why in [("hdfs://nn/t", "not hdfs://"), ("s3://bucket", "s3://bucket/path"),
                     ("", "must name a table")]:
        with pytest.raises(ConfigError, match=why):
            table_location(bad, config)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        table_location(str(tmp_path / "file"), config)


def test_a_table_elsewhere_takes_its_own_s3_settings(tmp_path: Path) -> None:
    """``table_access``: the table's settings in place of the store's; credentials
    as a whole (an empty key id: the default chain's); bad ones named."""
    store = store_config(tmp_path / "s").replace(
        s3_endpoint_url="http://store:9000", s3_access_key_id="STORE",
        s3_secret_access_key="STORE-SECRET", s3_session_token="STORE-TOKEN")
    assert table_access(store, None) is store
    elsewhere = table_access(store, {"s3_endpoint_url": "http://lake:9000",
                                     "s3_access_key_id": "AK", "s3_secret_access_key": "SK"})
    assert table_location("s3://lake/t", elsewhere).storage_options == {
        "AWS_ENDPOINT_URL": "http://lake:9000", "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}
    near = table_access(store, {"s3_region": "eu-west-1"})  # the store's credentials
    assert (near.s3_endpoint_url, near.s3_region, near.s3_access_key_id,
            near.s3_session_token) == ("http://store:9000", "eu-west-1", "STORE", "STORE-TOKEN")
    chain = table_access(store, {"s3_access_key_id": ""})
    assert "AWS_ACCESS_KEY_ID" not in table_location("s3://lake/t", chain).storage_options
    for bad, named in [({"s3_bucket": "b"}, "s3_bucket"),
                       ({"s3_access_key_id": "AK"}, "s3_secret_access_key"),
                       ({"s3_secret_access_key": "SK"}, "s3_access_key_id")]:
        with pytest.raises(ConfigError, match=named) as caught:
            table_access(store, bad)
        assert "SK" not in str(caught.value) and "STORE-SECRET" not in str(caught.value)


def test_files_are_cut_at_the_target_size_each_row_once(tmp_path: Path) -> None:
    """A partition's rows past the target size go to more files, each about the
    target at most (a row group over), together every row once."""
    where = table_location(str(tmp_path / "t"), store_config(tmp_path / "s"))
    one = write_files(where, "big", 0, iter([batch(0, 600)]))
    assert len(one) == len(TOPICS)  # one file per partition at the default 128 MiB
    target = 8 * 1024
    files = write_files(where, "small", 0, iter([batch(0, 600)]), target_size=target)
    per_topic = {t: [f for f in files if f.topic == t] for t in TOPICS}
    assert all(len(fs) >= 4 for fs in per_topic.values()), {t: len(fs) for t, fs
                                                            in per_topic.items()}
    assert all(f.size <= 2 * target for f in files), sorted(f.size for f in files)[-3:]
    assert len({f.path for f in files}) == len(files)
    commit(where, None, "src", files, ends={("b0", t, 0): 600 for t in TOPICS}, info={})
    assert identities(where) == sorted((t, i) for t in TOPICS for i in range(600))
    spans = sorted(json.loads(f.queues)[0][4:] for f in per_topic["orders"])
    assert spans[0][0] == 0 and spans[-1][1] == 599
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans)), spans


def test_optimize_compacts_and_vacuum_deletes_what_no_version_needs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ten small commits compacted into one file per partition by ``tieredstore
    table optimize`` (rows and each queue's end kept); ``vacuum`` then deletes
    the files optimize replaced and a killed run's uncommitted file, and leaves
    a continuous export's checkpoint alone; ``--dry-run`` deletes nothing."""
    out = tmp_path / "t"
    where = table_location(str(out), store_config(tmp_path / "s"))
    table = None
    for n in range(10):
        files = write_files(where, f"r{n}", 0, iter([batch(n * 5, n * 5 + 5)]))
        commit(where, table, "src", files, ends={("b0", "orders", 0): n * 5 + 5}, info={})
        table = open_table(where)
    orphan = write_files(where, "killed", 0, iter([batch(50, 55)]))  # never committed
    checkpoint = out / "_tieredstore_checkpoint" / "commits" / "0"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_text("v1")
    before = identities(where)
    assert len(DeltaTable(where.uri).file_uris()) == 10 * len(TOPICS)

    assert cli_main(["table", "optimize", str(out), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["files_removed"], done["files_added"]) == (10 * len(TOPICS), len(TOPICS))
    assert len(DeltaTable(where.uri).file_uris()) == len(TOPICS)
    assert identities(where) == before
    assert exported_end(open_table(where), "b0", "orders", 0) == 50

    on_disk = {p for p in out.rglob("*.parquet")}
    assert len(on_disk) == 11 * len(TOPICS) + len(orphan)
    assert cli_main(["table", "vacuum", str(out), "--retention-hours", "0", "--dry-run",
                     "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["files"]
    assert len(listed) == 10 * len(TOPICS) + len(orphan)
    assert {p for p in out.rglob("*.parquet")} == on_disk
    assert cli_main(["table", "vacuum", str(out), "--retention-hours", "0"]) == 0
    assert f"{len(listed)} file(s) deleted" in capsys.readouterr().out
    assert len(list(out.rglob("*.parquet"))) == len(TOPICS)
    assert checkpoint.read_text() == "v1"
    assert identities(where) == before
    # The default retention (a week) keeps everything younger.
    assert cli_main(["table", "vacuum", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == []


def test_table_commands_refuse_what_is_not_an_export_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["table", "optimize", str(tmp_path / "none")]) == 2
    assert "no Delta table there" in capsys.readouterr().err


def test_a_run_commit_is_made_again_only_while_its_queues_did_not_move(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """commit_run: beaten by a commit of another queue, it commits again on top;
    beaten by one of its own queue, it fails naming it; a commit whose reply was
    lost but took effect is recognised by its transactions."""
    # The module (tieredstore.spark.jobs.export is also the name of the job function).
    export = importlib.import_module("tieredstore.spark.jobs.export")

    where = table_location(str(tmp_path / "t"), store_config(tmp_path / "s"))
    commit(where, None, "src", write_files(where, "r0", 0, iter([batch(0, 2)])),
           ends={("b0", "orders", 0): 2, ("b0", "a=b", 0): 2}, info={})
    based = open_table(where)
    commit(where, open_table(where), "src", [], ends={("b0", "a=b", 0): 9}, info={})
    files = write_files(where, "r1", 0, iter([batch(2, 4)]))
    version = export.commit_run(where, based, "src", files, run="r1",
                                ends={("b0", "orders", 0): 4}, info={})
    assert version == 2
    assert exported_end(open_table(where), "b0", "orders", 0) == 4

    with pytest.raises(TableError, match=r"run r2 failed: another export committed "
                                         r"tieredstore:\[\"b0\", \"orders\", 0\] \(now 4, "
                                         r"was 2\)"):
        export.commit_run(where, based, "src", files, run="r2",
                          ends={("b0", "orders", 0): 4}, info={})

    real = export.commit

    def reply_lost(*args: Any, **kwargs: Any) -> int:
        real(*args, **kwargs)
        raise OSError("connection reset")

    monkeypatch.setattr(export, "commit", reply_lost)
    at = open_table(where)
    assert export.commit_run(where, at, "src", [], run="r3", ends={("b0", "orders", 0): 6},
                             info={}, transactions={"tieredstore-stream:q": 0}) == 3
    assert open_table(where).version() == 3  # committed once
    with pytest.raises(TableError, match=r"run r4 failed: another export .* reply lost"):
        export.commit_run(where, open_table(where), "src", [], run="r4",
                          ends={("b0", "orders", 0): 8}, info={})


def test_table_optimize_on_s3_takes_the_endpoint_from_its_flags(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An s3:// table (moto): endpoint and region from the flags, keys from the
    environment (never flags), as for export."""
    import boto3

    from tests.servers import ACCESS_KEY, SECRET_KEY, moto_process

    with moto_process() as s3:
        boto3.client("s3", endpoint_url=s3.endpoint_url, region_name="us-east-1",
                     aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY
                     ).create_bucket(Bucket="lake")
        config = store_config(tmp_path / "s").replace(
            s3_endpoint_url=s3.endpoint_url, s3_region="us-east-1",
            s3_access_key_id=ACCESS_KEY, s3_secret_access_key=SECRET_KEY)
        where = table_location("s3://lake/t", config)
        table = None
        for n in range(3):
            commit(where, table, "src", write_files(where, f"r{n}", 0,
                                                    iter([batch(n * 4, n * 4 + 4)])),
                   ends={("b0", "orders", 0): n * 4 + 4}, info={})
            table = open_table(where)
        monkeypatch.setenv("TIEREDSTORE_S3_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("TIEREDSTORE_S3_SECRET_ACCESS_KEY", SECRET_KEY)
        assert cli_main(["table", "optimize", "s3://lake/t", "--endpoint", s3.endpoint_url,
                         "--region", "us-east-1", "--json"]) == 0
        done = json.loads(capsys.readouterr().out)
        assert (done["table"], done["files_removed"], done["files_added"]) == (
            "s3://lake/t", 3 * len(TOPICS), len(TOPICS))
        after = DeltaTable("s3://lake/t", storage_options=dict(where.storage_options))
        assert len(after.file_uris()) == len(TOPICS)
        assert after.to_pyarrow_table().num_rows == 12 * len(TOPICS)
