"""A DataFrame reused across queries returns what each query asks, every time.

PySpark (4.1 to 4.3 at least) keeps the read plan that a scan's pushed
filters produced on the provider object that every scan of the DataFrame
shares, and hands it to the next scan that pushes no filter, and to the other
scans of the same query (:mod:`tieredstore.spark.read.pushdown`). A reader that
pruned by pushed filters therefore answered ``df.count()`` with the count of
the previous filtered query. These tests run that exact sequence and its
variants (groupBy, cache, self-union, self-join, one filter then another),
with Python filter pushdown switched on and off in the session, and compare
every answer with the rows that were written; one test reproduces the leak
with a source that does prune, and one reads the warning the planning worker
logs instead of pruning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from pyspark.sql.datasource import DataSourceReader, EqualTo, Filter, InputPartition
from pyspark.sql.types import IntegerType, StructField, StructType

from tests.spark.conftest import QUEUES, BuiltStore
from tieredstore.spark.read.source import Source

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
WORKER_LOGS_CONF = "spark.sql.pyspark.worker.logging.enabled"


@contextmanager
def settings(spark: Any, conf: Mapping[str, str]) -> Iterator[Any]:
    """The shared session with ``conf`` set, then set back."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@pytest.fixture(params=["true", "false"], ids=["pushdown-conf-on", "pushdown-conf-off"])
def session(spark: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The shared session with Python filter pushdown set as the test asks."""
    with settings(spark, {PUSHDOWN_CONF: request.param}):
        yield spark


def per_topic(built: BuiltStore) -> Counter[str]:
    return Counter(row[0] for row in built.rows())


def test_count_filtered_count_count_groupby(session: Any, merged_store: BuiltStore) -> None:
    from pyspark.sql import functions as F

    df = session.read.format("tieredstore").options(**merged_store.options).load()
    total = len(merged_store.rows())
    audit = per_topic(merged_store)["audit"]
    assert df.count() == total
    assert df.where(F.col("topic") == "audit").count() == audit
    assert df.count() == total
    assert dict(Counter({r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()})
                ) == dict(per_topic(merged_store))
    assert df.where(F.col("offset") >= 200).count() == sum(
        1 for r in merged_store.rows() if r[2] >= 200)
    assert df.where((F.col("topic") == "orders") & (F.col("queue_id") == 1)).count() == sum(
        1 for r in merged_store.rows() if r[:2] == ("orders", 1))
    assert df.count() == total


def test_cache_then_filter(session: Any, merged_store: BuiltStore) -> None:
    from pyspark.sql import functions as F

    df = session.read.format("tieredstore").options(**merged_store.options).load()
    assert df.where(F.col("topic") == "audit").count() == per_topic(merged_store)["audit"]
    cached = df.cache()
    try:
        assert cached.count() == len(merged_store.rows())
        assert cached.where(F.col("queue_id") == 2).count() == sum(
            1 for r in merged_store.rows() if r[1] == 2)
        assert cached.where(F.col("topic") == "orders").count() == per_topic(
            merged_store)["orders"]
    finally:
        cached.unpersist()


def test_self_union_and_self_join(session: Any, merged_store: BuiltStore) -> None:
    from pyspark.sql import functions as F

    df = session.read.format("tieredstore").options(**merged_store.options).load()
    audit = df.where(F.col("topic") == "audit")
    union = audit.unionByName(df)
    assert union.count() == per_topic(merged_store)["audit"] + len(merged_store.rows())
    # Each audit message joined with every queue's message at the same offset.
    joined = audit.alias("a").join(df.alias("b"), F.col("a.offset") == F.col("b.offset"))
    by_offset = Counter(r[2] for r in merged_store.rows())
    want = sum(by_offset[r[2]] for r in merged_store.rows() if r[0] == "audit")
    assert joined.count() == want
    assert df.count() == len(merged_store.rows())


def test_every_queue_after_a_narrow_query(session: Any, merged_store: BuiltStore) -> None:
    from pyspark.sql import functions as F

    df = session.read.format("tieredstore").options(**merged_store.options).load()
    assert df.where(F.col("offset").isin(3, 9)).count() == 2 * len(QUEUES)
    got = {(r["topic"], r["queue_id"]): r["n"] for r in
           df.groupBy("topic", "queue_id").agg(F.count("*").alias("n")).collect()}
    want = Counter(r[:2] for r in merged_store.rows())
    assert got == dict(want)


def test_one_filter_then_another_on_the_same_dataframe(session: Any,
                                                      merged_store: BuiltStore) -> None:
    from pyspark.sql import functions as F

    df = session.read.format("tieredstore").options(**merged_store.options).load()
    rows = merged_store.rows()
    audit = df.where(F.col("topic") == "audit")
    orders_1 = df.where((F.col("topic") == "orders") & (F.col("queue_id") == 1))
    late = df.where(F.col("offset") >= 200)
    assert audit.count() == sum(1 for r in rows if r[0] == "audit")
    assert orders_1.count() == sum(1 for r in rows if r[:2] == ("orders", 1))
    assert late.count() == sum(1 for r in rows if r[2] >= 200)
    assert df.where(F.col("offset").between(10, 20)).count() == sum(
        1 for r in rows if 10 <= r[2] <= 20)
    # Two scans of one query, each with filters of its own.
    assert audit.unionByName(orders_1).count() == sum(
        1 for r in rows if r[0] == "audit" or r[:2] == ("orders", 1))
    joined = audit.alias("a").join(late.alias("b"), F.col("a.offset") == F.col("b.offset"))
    late_by_offset = Counter(r[2] for r in rows if r[2] >= 200)
    assert joined.count() == sum(late_by_offset[r[2]] for r in rows if r[0] == "audit")
    assert df.count() == len(rows)


class PruningReader(DataSourceReader):  # type: ignore[misc]
    """Prunes its partitions by a pushed ``k = value`` and returns every filter to
    Spark: the plan PySpark shares between scans, at its smallest."""

    def __init__(self) -> None:
        self.only: int | None = None

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if isinstance(f, EqualTo) and f.attribute == ("k",):
                self.only = f.value
            yield f

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(k) for k in range(4) if self.only in (None, k)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, int]]:
        for i in range(10):
            yield partition.value, i


class PruningSource(Source):
    """``pruning-probe``: 4 partitions ``k`` of 10 rows ``i``."""

    format_name = "pruning-probe"
    columns = StructType([StructField("k", IntegerType()), StructField("i", IntegerType())])

    def reader(self, schema: StructType) -> PruningReader:
        return PruningReader()


def test_pyspark_hands_one_scans_pushed_plan_to_the_other_scans(spark: Any) -> None:
    """The reproduction of why the reader does not prune by Spark's filters. It
    fails once the PySpark in use plans each scan from its own filters: then the
    reader may prune (see tieredstore/spark/read/pushdown.py)."""
    from pyspark.sql import functions as F

    spark.dataSource.register(PruningSource)
    with settings(spark, {PUSHDOWN_CONF: "true"}):
        df = spark.read.format("pruning-probe").load()
        k = F.col("k")
        got = (df.count(), df.where(k == 1).count(), df.count(),
               df.where(k == 1).unionByName(df.where(k == 2)).count())
    assert got != (40, 10, 40, 20), "PySpark no longer shares pushed read plans between scans"
    # The count after a filtered count reads the filtered plan; both sides of
    # the union read the plan of the side planned last.
    assert got == (40, 10, 10, 10)


def test_pushdown_planning_logs_the_options_that_would_prune(spark: Any,
                                                            merged_store: BuiltStore) -> None:
    from pyspark.sql import functions as F

    with settings(spark, {PUSHDOWN_CONF: "true", WORKER_LOGS_CONF: "true"}):
        df = spark.read.format("tieredstore").options(**merged_store.options).load()
        where = (F.col("offset") >= 200) & (F.col("topic") == "audit")
        assert df.where(where).count() == sum(
            1 for r in merged_store.rows() if r[2] >= 200 and r[0] == "audit")
        logs = [r.msg for r in spark.tvf.python_worker_logs().collect()]
    warnings = [m for m in logs if m.startswith("tieredstore:")]
    assert any("topic='audit', offset_from='200'" in m for m in warnings), logs
