"""``spark.readStream.format("tieredstore")``: Kafka's conventions over a store.

Queries write to a Parquet sink with a checkpoint; the oracle is what the tests
appended, as ``(broker, topic, queue_id, offset)``, kept apart from the code
under test."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import T0, store_config
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.spark.read.batches import SCHEMA
from tieredstore.spark.read.datasource import TieredStoreDataSource
from tieredstore.spark.read.stream import parse_offsets, share
from tieredstore.store import MessageStore

pytestmark = [pytest.mark.spark]

Key = tuple[str, str, int, int]


def append(config: TieredStoreConfig, topic: str, queue_id: int, count: int, *,
           broker: str = "broker-0", size: int = 100) -> set[Key]:
    """``count`` messages more on one queue (stored in 2023: past any retention)."""
    out = set()
    with MessageStore.open(config.replace(broker=broker)) as store:
        for i in range(count):
            offset = store.append(topic, queue_id, b"x" * size, timestamp=T0 + i)
            out.add((broker, topic, queue_id, offset))
    return out


def expire(config: TieredStoreConfig, topic: str, queue_id: int) -> int:
    """Delete what retention removes; the queue's first stored offset after."""
    with MessageStore.open(config) as store:
        assert store.min_offset(topic, queue_id) == 0  # the queue opened, all there
        assert store.delete_expired() > 0
        return store.min_offset(topic, queue_id)


def run(spark: Any, path: Path, sink: Path, *, options: dict[str, str] | None = None
        ) -> Any:
    """One ``Trigger.AvailableNow`` run into ``sink`` (checkpoint beside it), awaited."""
    stream = (spark.readStream.format("tieredstore").option("path", str(path))
              .options(**(options or {})).load())
    query = (stream.writeStream.format("parquet").option("path", str(sink / "data"))
             .option("checkpointLocation", str(sink / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert not query.isActive, "Trigger.AvailableNow did not end"
    return query


def sunk(spark: Any, sink: Path) -> list[Key]:
    rows = spark.read.parquet(str(sink / "data")).select(
        "broker", "topic", "queue_id", "offset").collect()
    return sorted(tuple(r) for r in rows)


def test_available_now_reads_everything_once_and_ends_then_resumes(
        spark: Any, tmp_path: Path) -> None:
    config = store_config(tmp_path / "store")
    written = append(config, "t", 0, 150) | append(config, "t", 1, 40)
    query = run(spark, tmp_path / "store", tmp_path / "sink")
    assert sunk(spark, tmp_path / "sink") == sorted(written)
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert end == {"broker-0/t": {"0": 150, "1": 40}}
    # A queue and a broker that appear later are read from their earliest.
    more = append(config, "t", 0, 10) | append(config, "t", 2, 5) | append(
        config, "t", 0, 7, broker="broker-1")
    run(spark, tmp_path / "store", tmp_path / "sink")
    assert sunk(spark, tmp_path / "sink") == sorted(written | more)


def test_max_offsets_per_trigger_bounds_each_batch(spark: Any, tmp_path: Path) -> None:
    config = store_config(tmp_path / "store")
    written = append(config, "t", 0, 130) | append(config, "t", 1, 30)
    query = run(spark, tmp_path / "store", tmp_path / "sink",
                options={"maxOffsetsPerTrigger": "50"})
    counts = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert counts and max(counts) <= 50 and sum(counts) == len(written), counts
    assert len(counts) == 4, counts  # 160 messages, 50 at a time
    assert sunk(spark, tmp_path / "sink") == sorted(written)


def test_max_bytes_per_trigger_bounds_each_batch(spark: Any, tmp_path: Path) -> None:
    config = store_config(tmp_path / "store")
    written = append(config, "t", 0, 100)
    query = run(spark, tmp_path / "store", tmp_path / "sink",
                options={"maxBytesPerTrigger": "6000"})  # a record: 100 bytes of body, and more
    counts = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert counts and max(counts) < 6000 // 100 and sum(counts) == len(written), counts
    assert len(counts) >= 2, counts
    assert sunk(spark, tmp_path / "sink") == sorted(written)


@pytest.mark.parametrize("fail", [True, False])
def test_offsets_retention_removed_unread_fail_the_query_or_are_skipped(
        spark: Any, tmp_path: Path, fail: bool, caplog: pytest.LogCaptureFixture) -> None:
    config = store_config(tmp_path / "store")
    first = append(config, "t", 0, 30, size=1000)
    run(spark, tmp_path / "store", tmp_path / "sink")  # read 0..29, then stopped
    # 170 more: segments sealed, and old enough to expire
    later = append(config, "t", 0, 170, size=1000)
    lowest = expire(config, "t", 0)
    assert lowest > 30, lowest
    kept = {k for k in later if k[3] >= lowest}
    options = {"failOnDataLoss": str(fail).lower()}
    if fail:
        with pytest.raises(Exception, match=rf"broker-0/t/0 offsets \[30, {lowest}\)"):
            run(spark, tmp_path / "store", tmp_path / "sink", options=options)
        assert sunk(spark, tmp_path / "sink") == sorted(first)
    else:
        run(spark, tmp_path / "store", tmp_path / "sink", options=options)
        assert sunk(spark, tmp_path / "sink") == sorted(first | kept)
        # The warning is logged where Spark plans the batch (a Python worker of the
        # JVM's): the same planning, in this process, logs it here.
        reader = TieredStoreDataSource({"path": str(tmp_path / "store"),
                                        "failOnDataLoss": "false"}).streamReader(SCHEMA)
        with caplog.at_level(logging.WARNING, "tieredstore.spark.read.stream"):
            parts = reader.partitions({"broker-0/t": {"0": 30}}, {"broker-0/t": {"0": 200}})
        assert f"skipped {lowest - 30} message(s)" in caplog.text, caplog.text
        assert "broker-0/t/0 offsets [30, " in caplog.text
        assert parts and parts[0].slice.first_offset == lowest


def test_batch_only_options_and_bad_starting_offsets_are_refused(
        spark: Any, tmp_path: Path) -> None:
    config = store_config(tmp_path / "store")
    append(config, "t", 0, 3)
    for options, message in [({"offset_from": "1"}, "offset_from.*batch source"),
                             ({"startingOffsets": "[1]"}, "startingOffsets"),
                             ({"failOnDataLoss": "maybe"}, "failOnDataLoss")]:
        with pytest.raises(Exception, match=message):
            run(spark, tmp_path / "store", tmp_path / "sink", options=options)


def test_starting_offsets_json_latest_and_earliest(spark: Any, tmp_path: Path) -> None:
    config = store_config(tmp_path / "store")
    written = append(config, "t", 0, 20) | append(config, "t", 1, 5)
    start = json.dumps({"broker-0/t": {"0": 15}})  # t/1 left out: from its earliest
    run(spark, tmp_path / "store", tmp_path / "a", options={"startingOffsets": start})
    assert sunk(spark, tmp_path / "a") == sorted(
        k for k in written if k[2] == 1 or k[3] >= 15)
    run(spark, tmp_path / "store", tmp_path / "b", options={"startingOffsets": "latest"})
    more = append(config, "t", 1, 2)
    run(spark, tmp_path / "store", tmp_path / "b", options={"startingOffsets": "latest"})
    assert sunk(spark, tmp_path / "b") == sorted(more)


def test_offsets_json_and_shares_are_what_the_docs_say() -> None:
    assert parse_offsets({"b/t": {"0": 5, "3": 0}}) == {("b", "t", 0): 5, ("b", "t", 3): 0}
    for bad in ({"t": {"0": 1}}, {"b/t": {"0": -1}}, {"b/t": {"x": 1}}, {"b/t": 3}):
        with pytest.raises(ConfigError, match="startingOffsets"):
            parse_offsets(bad)
    q = [("b", "t", i) for i in range(3)]
    assert share(10, {q[0]: 100, q[1]: 1, q[2]: 0}) == {q[0]: 9, q[1]: 1}
    assert share(2, {q[0]: 5, q[1]: 9, q[2]: 1}) == {q[0]: 1, q[1]: 1}
    assert share(50, {q[0]: 3, q[1]: 4}) == {q[0]: 3, q[1]: 4}
    assert sum(share(50, {q[0]: 130, q[1]: 30}).values()) == 50
