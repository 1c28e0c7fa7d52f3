"""spark.read.format("tieredstore"): every message back, and filters that prune segments."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server
from tests.spark.conftest import (
    PER_QUEUE,
    QUEUES,
    T0,
    UNITS_PER_SEGMENT,
    BuiltStore,
    build_store,
)
from tieredstore.objectstore import ByteRange, LocalObjectStore, ObjectData, ObjectInfo
from tieredstore.spark.read.plan import SegmentSlice, plan_read
from tieredstore.spark.read.reader import scan_slice
from tieredstore.spark.read.selection import Selection, Span
from tieredstore.store import log_path, reading_fetcher
from tieredstore.store.ops.brokers import cluster_root

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEALED_PER_QUEUE = PER_QUEUE // UNITS_PER_SEGMENT  # 3, and one active tail
COLUMNS = ("topic", "queue_id", "offset", "unix_millis(store_timestamp) AS ts", "keys", "tags",
           "properties", "body")


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    got = [tuple(r) for r in df.selectExpr(*COLUMNS).collect()]
    return sorted((t, q, o, ts, list(k), tg, dict(p), bytes(b))
                  for t, q, o, ts, k, tg, p, b in got)


def assert_same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    assert len(got) == len(want), f"{len(got)} rows read, {len(want)} expected"
    for g, w in zip(got, want, strict=True):
        assert g == w, f"read {g[:4]}..., wrote {w[:4]}...: {g} != {w}"


def test_reads_back_every_message_as_written(spark: Any, merged_store: BuiltStore) -> None:
    df = spark.read.format("tieredstore").options(**merged_store.options).load()
    assert df.rdd.getNumPartitions() == len(QUEUES) * (SEALED_PER_QUEUE + 1)
    assert_same(rows_of(df), merged_store.rows())


def test_reads_the_newest_bytes_from_log_objects(spark: Any, tmp_path: Path) -> None:
    """Write mode log: the open segments' newest bytes are pieces of log objects
    (not yet in chunks); a scan of an open segment reads them too."""
    built = build_store(tmp_path / "log", write_mode="log")
    log_objects = [p for p in (tmp_path / "log").rglob("*") if "/log/log-" in str(p)]
    assert any(p.stat().st_size > 200 for p in log_objects), "nothing in log objects"
    df = spark.read.format("tieredstore").options(**built.options).load()
    assert_same(rows_of(df), built.rows())


def test_reads_a_store_on_s3(spark: Any, moto: S3Server, tmp_path: Path) -> None:
    """Options name an S3 store; every task builds its own client in its own loop."""
    bucket = f"spark-{uuid.uuid4().hex[:12]}"
    built = build_store(tmp_path, queues=QUEUES[:2], per_queue=100, backend="s3",
                        s3_bucket=bucket, s3_endpoint_url=moto.endpoint_url,
                        s3_region="us-east-1", s3_addressing_style="path",
                        s3_access_key_id=ACCESS_KEY, s3_secret_access_key=SECRET_KEY,
                        cluster="c1", key_prefix="ts")
    options = {"backend": "s3", "bucket": bucket, "endpoint": moto.endpoint_url,
               "region": "us-east-1", "addressing_style": "path",
               "access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY,
               "cluster": "c1", "key_prefix": "ts"}
    df = spark.read.format("tieredstore").options(**options).load()
    assert df.rdd.getNumPartitions() == 2 * (100 // UNITS_PER_SEGMENT + 1)
    assert_same(rows_of(df), built.rows())


def test_spark_filters_return_exactly_their_rows(spark: Any, merged_store: BuiltStore) -> None:
    """``where`` is applied to the rows by Spark; the read plan never depends on it."""
    from pyspark.sql import functions as F

    df = spark.read.format("tieredstore").options(**merged_store.options).load()
    ts = F.col("store_timestamp")

    def at(ms: int) -> Any:
        return F.timestamp_millis(F.lit(ms))

    every = len(QUEUES) * (SEALED_PER_QUEUE + 1)
    cases: list[tuple[Any, Callable[[tuple[Any, ...]], bool]]] = [
        (F.col("topic") == "orders", lambda r: r[0] == "orders"),
        ((F.col("topic") == "orders") & (F.col("queue_id") == 1)
         & (F.col("offset") >= 70) & (F.col("offset") < 130),
         lambda r: r[:2] == ("orders", 1) and 70 <= r[2] < 130),
        (F.col("offset").isin(3, 9), lambda r: r[2] in (3, 9)),
        ((ts >= at(T0 + 130_000)) & (ts <= at(T0 + 140_000)),
         lambda r: T0 + 130_000 <= r[3] <= T0 + 140_000),
        (F.col("topic").startswith("aud"), lambda r: r[0] == "audit"),
        (F.col("topic") == "nothing", lambda r: False),
    ]
    for condition, keeps in cases:
        filtered = df.where(condition)
        assert filtered.rdd.getNumPartitions() == every, condition
        assert_same(rows_of(filtered), [r for r in merged_store.rows() if keeps(r)])


@pytest.mark.parametrize(("options", "partitions", "keeps"), [
    # (selection options, input partitions planned, which written rows they keep)
    ({"topic": "orders"}, 3 * (SEALED_PER_QUEUE + 1), lambda r: r[0] == "orders"),
    ({"topic": "orders", "queue_id": "1"}, SEALED_PER_QUEUE + 1,
     lambda r: r[:2] == ("orders", 1)),
    ({"topic": "orders", "queue_id": "1", "offset_from": "70", "offset_to": "130"}, 2,
     lambda r: r[:2] == ("orders", 1) and 70 <= r[2] < 130),
    ({"offset_from": "200"}, 4, lambda r: r[2] >= 200),  # the active tails only
    ({"time_to": str(T0 + 50_000)}, 4, lambda r: r[3] < T0 + 50_000),
    ({"time_from": str(T0 + 130_000), "time_to": str(T0 + 140_001)}, 4,
     lambda r: T0 + 130_000 <= r[3] <= T0 + 140_000),
    ({"time_from": "2023-11-14T22:16:56"}, 4, lambda r: r[3] >= T0 + 216_000),
])
def test_options_choose_segments_before_reading(
        spark: Any, merged_store: BuiltStore, options: dict[str, str], partitions: int,
        keeps: Callable[[tuple[Any, ...]], bool]) -> None:
    df = spark.read.format("tieredstore").options(**merged_store.options, **options).load()
    # Spark plans one empty placeholder partition when the source gives none.
    assert df.rdd.getNumPartitions() == max(partitions, 1)
    assert_same(rows_of(df), [r for r in merged_store.rows() if keeps(r)])


def test_pushdown_cannot_be_switched_on(spark: Any, merged_store: BuiltStore) -> None:
    with pytest.raises(Exception, match="pushdown"):
        spark.read.format("tieredstore").options(**merged_store.options) \
            .option("pushdown", "true").load().count()


def test_options_select_exactly(spark: Any, merged_store: BuiltStore) -> None:
    df = (spark.read.format("tieredstore").options(**merged_store.options)
          .option("topic", "audit").option("offset_from", "64").option("offset_to", "150")
          .load())
    assert df.rdd.getNumPartitions() == 2
    assert_same(rows_of(df), merged_store.rows(topic="audit", lo=64, hi=150))


def test_messages_per_partition_splits_sealed_segments(spark: Any,
                                                       merged_store: BuiltStore) -> None:
    df = (spark.read.format("tieredstore").options(**merged_store.options)
          .option("topic", "orders").option("queue_id", "2")
          .option("messages_per_partition", "16").load())
    assert df.rdd.getNumPartitions() == SEALED_PER_QUEUE * (UNITS_PER_SEGMENT // 16) + 1
    assert_same(rows_of(df), merged_store.rows(topic="orders", queue_id=2))


class RecordingStore(LocalObjectStore):
    """A local store that remembers every key it lists, reads or heads."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, fsync=False)
        self.touched: list[tuple[str, str]] = []
        self.ranges: list[tuple[str, ByteRange | None]] = []  # every GET's key and range

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        self.touched.append(("get", key))
        self.ranges.append((key, byte_range))
        return await super().get_object(key, byte_range)

    async def head(self, key: str) -> ObjectInfo:
        self.touched.append(("head", key))
        return await super().head(key)

    def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        self.touched.append(("list", prefix))
        return super().list_pages(prefix)


@dataclass
class Read:
    """What a planned read did: messages, the requests of the plan and of the tasks,
    and the slices planned."""

    count: int
    planning: list[tuple[str, str]]
    reading: list[tuple[str, str]]
    reading_ranges: list[tuple[str, ByteRange | None]]
    slices: list[SegmentSlice]

    @property
    def touched(self) -> list[tuple[str, str]]:
        return self.planning + self.reading


async def read_selected(built: BuiltStore, selection: Selection) -> Read:
    """Plan and read as the DataSource does, on a recording store."""
    store = RecordingStore(built.path)
    fetcher = reading_fetcher(store, built.config)
    count = 0
    try:
        slices = await plan_read(store, built.config, selection)
        planned, ranged = len(store.touched), len(store.ranges)
        for part in slices:
            async for batch in scan_slice(built.config, part, selection.wants,
                                          on=(store, fetcher)):
                assert batch.columns is not None
                count += len(batch.columns)
    finally:
        await fetcher.close()
        await store.close()
    return Read(count, store.touched[:planned], store.touched[planned:],
                store.ranges[ranged:], slices)


def test_a_queue_filter_reads_no_other_queue(merged_store: BuiltStore) -> None:
    selection = Selection(topics=frozenset(["orders"]), queue_ids=frozenset([1]))
    read = asyncio.run(read_selected(merged_store, selection))
    assert read.count == PER_QUEUE
    assert [key for op, key in read.touched if op == "get"], "nothing was read"
    # The plan reaches the open segments: it lists the broker's log (write mode log)
    # and reads each log object's index once, for every task.
    log_dir = log_path(merged_store.config).directory
    log_gets = [key for op, key in read.planning if op == "get" and key.startswith(log_dir)]
    assert len(log_gets) == len(set(log_gets))
    # Besides, the one listing of the cluster's brokers (list_brokers).
    brokers_root = cluster_root(merged_store.config)
    strangers = [(op, key) for op, key in read.planning
                 if "/orders/1/" not in key and not key.startswith(log_dir)
                 and (op, key) != ("list", brokers_root)]
    assert not strangers, f"planning requests outside orders/1: {strangers}"
    # A task reads its own queue's objects, and of the log objects only the ranges
    # of its queue's pieces, which its slice carries.
    pieces = {(key, offset, offset + length)
              for part in read.slices for _, _, _, length, key, offset, _ in part.log_pieces or ()}
    assert pieces, "no log piece planned: the test reads no log"
    for op, key in read.reading:
        assert "/orders/1/" in key or (op == "get" and key.startswith(log_dir)), (op, key)
    for key, span in read.reading_ranges:
        if key.startswith(log_dir):
            assert span is not None and any(
                k == key and lo <= span.start and span.start + span.length <= hi
                for k, lo, hi in pieces), (key, span)


def test_an_offset_filter_reads_only_the_segments_holding_it(merged_store: BuiltStore) -> None:
    selection = Selection(topics=frozenset(["orders"]), queue_ids=frozenset([0]),
                          offsets=Span(130, 140))
    read = asyncio.run(read_selected(merged_store, selection))
    count, touched = read.count, read.touched
    assert count == 11
    segments = {key.split("/consumequeue/")[1].split("/")[0]
                for op, key in touched if op == "get" and "/consumequeue/" in key}
    assert segments == {f"seg-{2 * UNITS_PER_SEGMENT * 32:020d}"}, segments
