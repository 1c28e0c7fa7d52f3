"""The export table on its own (no Spark): where it lives, its data files, and its
Delta commit carrying each queue's end offset; read back with delta-rs."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from deltalake import DeltaTable

from tests.spark.conftest import store_config
from tieredstore.errors import ConfigError
from tieredstore.spark.table import (
    TABLE_SCHEMA,
    Location,
    commit,
    exported_end,
    open_table,
    partition_dir,
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
