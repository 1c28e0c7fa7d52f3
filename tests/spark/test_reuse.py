"""A DataFrame reused across queries returns what each query asks, every time.

PySpark (4.1 to 4.3 at least) keeps the read plan that a query's pushed
filters produced on the relation's data source object and hands it to the
next query over the same relation that pushes no filter. A reader that pruned
by pushed filters therefore answered ``df.count()`` with the count of the
previous filtered query. These tests run that exact sequence and its
variants (groupBy, cache, self-union, self-join), with Python filter pushdown
switched on and off in the session, and compare every answer with the rows
that were written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.spark.conftest import QUEUES, BuiltStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture(params=["true", "false"], ids=["pushdown-conf-on", "pushdown-conf-off"])
def session(spark: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The shared session with Python filter pushdown set as the test asks."""
    before = spark.conf.get(PUSHDOWN_CONF, None)
    spark.conf.set(PUSHDOWN_CONF, request.param)
    yield spark
    if before is None:
        spark.conf.unset(PUSHDOWN_CONF)
    else:
        spark.conf.set(PUSHDOWN_CONF, before)


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
