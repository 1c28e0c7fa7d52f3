"""The DataSource and the jobs over a cluster: two brokers (two stores of one
local directory) write one topic, each its own queue 0 and 1, and a topic is on
one broker only. Every row comes once, with its broker; option ``broker``
narrows; a broker, topic or queue on no selected broker is an error naming it.
The oracle is what was appended, per ``(broker, topic, queue_id)``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.spark.conftest import store_config
from tieredstore.config import TieredStoreConfig
from tieredstore.spark import jobs
from tieredstore.store import AsyncMessageStore

pytestmark = [pytest.mark.spark]

A, B = "broker-a", "broker-b"
# broker -> [(topic, queue, count)]
WRITTEN = {A: [("orders", 0, 30), ("orders", 1, 20)],
           B: [("orders", 0, 25), ("only-b", 0, 10)]}
Key = tuple[str, str, int, int]  # broker, topic, queue, offset


async def write(config: TieredStoreConfig) -> dict[Key, bytes]:
    """Both brokers open at once on one directory, as two hosts would."""
    stores = {b: await AsyncMessageStore.open(config.replace(broker=b)) for b in WRITTEN}
    out: dict[Key, bytes] = {}
    try:
        for broker, writes in WRITTEN.items():
            for topic, queue, count in writes:
                for i in range(count):
                    body = f"{broker}/{topic}/{queue}/{i}".encode()
                    offset = await stores[broker].append(topic, queue, body)
                    out[(broker, topic, queue, offset)] = body
            await stores[broker].flush()
    finally:
        for store in stores.values():
            await store.close()
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[Key, bytes]]:
    path = tmp_path_factory.mktemp("brokers")
    return path, asyncio.run(write(store_config(path)))


def read(spark: Any, path: Path, **options: str) -> dict[Key, bytes]:
    rows = (spark.read.format("tieredstore").option("path", str(path)).options(**options)
            .load().select("broker", "topic", "queue_id", "offset", "body").collect())
    got: dict[Key, bytes] = {}
    for r in rows:
        key = (r.broker, r.topic, r.queue_id, r.offset)
        assert key not in got, f"{key} read twice"
        got[key] = bytes(r.body)
    return got


def test_every_broker_is_read_each_row_once_with_its_broker(
        spark: Any, cluster: tuple[Path, dict[Key, bytes]]) -> None:
    path, written = cluster
    df = spark.read.format("tieredstore").option("path", str(path)).load()
    assert df.columns[:3] == ["topic", "broker", "queue_id"]
    assert read(spark, path) == written


def test_option_broker_narrows_and_topic_finds_its_broker(
        spark: Any, cluster: tuple[Path, dict[Key, bytes]]) -> None:
    path, written = cluster
    assert read(spark, path, broker=B) == {k: v for k, v in written.items() if k[0] == B}
    assert read(spark, path, broker=f"{A}, {B}", topic="orders", queue_id="0") == {
        k: v for k, v in written.items() if k[1:3] == ("orders", 0)}
    assert read(spark, path, topic="only-b") == {
        k: v for k, v in written.items() if k[1] == "only-b"}


@pytest.mark.parametrize(("options", "message"), [
    ({"broker": "broker-x"}, r"unknown broker 'broker-x'; brokers: broker-a, broker-b"),
    ({"broker": A, "topic": "only-b"}, r"unknown topic 'only-b'.*broker broker-b has it"),
    ({"broker": A, "topic": "only-b", "queue_id": "0"}, r"unknown topic 'only-b'"),
    ({"topic": "orders", "queue_id": "7"}, r"unknown queue orders/7"),
])
def test_what_no_selected_broker_has_is_an_error_naming_it(
        spark: Any, cluster: tuple[Path, dict[Key, bytes]], options: dict[str, str],
        message: str) -> None:
    path, _ = cluster
    with pytest.raises(Exception, match=message):
        read(spark, path, **options)


def test_stats_verify_and_export_name_each_queues_broker(
        spark: Any, cluster: tuple[Path, dict[Key, bytes]], tmp_path: Path) -> None:
    path, written = cluster
    options = {"path": str(path)}
    ends: dict[tuple[str, str, int], int] = {}
    for broker, topic, queue, offset in written:
        ends[(broker, topic, queue)] = max(ends.get((broker, topic, queue), 0), offset + 1)
    stats = {(r.broker, r.topic, r.queue_id): r.messages
             for r in jobs.stats(spark, options).collect()}
    assert stats == ends
    reports = jobs.verify_reports(spark, options, jobs.Filters(brokers=(B,)))
    assert [(c.broker, c.topic, c.queue_id, c.max_offset, c.error_count)
            for c in reports.queues] == [
        (b, t, q, n, 0) for (b, t, q), n in sorted(ends.items()) if b == B]
    out = tmp_path / "table"
    result = jobs.export(spark, options, str(out))
    assert result.rows == len(written)
    assert sorted(r[:3] for r in result.ranges) == sorted(ends)
    table = DeltaTable(str(out)).to_pyarrow_table(
        columns=["broker", "topic", "queue_id", "offset"]).to_pylist()
    assert sorted(tuple(r.values()) for r in table) == sorted(written)
    assert jobs.export(spark, options, str(out)).rows == 0  # nothing new
