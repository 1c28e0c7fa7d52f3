"""A format bound to a configuration resolved on the driver (``tieredstore.spark.bind``):
it reads a bucket whose credentials Spark's processes lack, and the secret shows
nowhere Spark displays; and the reader's named topics and queues are checked
against the store's listing."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server
from tests.spark.conftest import QUEUES, BuiltStore, build_store
from tests.spark.test_read import assert_same, rows_of
from tieredstore.spark import bind


def test_a_bound_format_reads_with_the_drivers_credentials_and_shows_no_secret(
        spark: Any, moto: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bucket = f"bound-{uuid.uuid4().hex[:12]}"
    built = build_store(tmp_path, queues=QUEUES[:2], per_queue=30, backend="s3",
                        s3_bucket=bucket, s3_endpoint_url=moto.endpoint_url,
                        s3_region="us-east-1", s3_access_key_id=ACCESS_KEY,
                        s3_secret_access_key=SECRET_KEY)
    name = bind(spark, built.config)
    assert name.startswith("tieredstore-bound-")
    df = spark.read.format(name).option("queue_id", "1").load()
    assert_same(rows_of(df), built.rows(queue_id=1))
    df.explain("extended")
    df.explain("formatted")
    shown = capsys.readouterr().out + df._jdf.queryExecution().toString()
    assert "BatchScan" in shown and SECRET_KEY not in shown
    assert not [kv for kv in spark.sparkContext.getConf().getAll() if SECRET_KEY in kv[1]]
    assert SECRET_KEY not in str(spark.conf.getAll)
    # A bound format reads its own store: a store option is an error (naming it,
    # and no value).
    with pytest.raises(Exception, match="reads the store it was bound to") as raised:
        spark.read.format(name).option("secret_access_key", "other").load().collect()
    assert "secret_access_key" in str(raised.value) and SECRET_KEY not in str(raised.value)


def test_a_topic_or_queue_the_store_lacks_is_an_error_naming_it(
        spark: Any, merged_store: BuiltStore) -> None:
    """As the command line's: the store's listing names what exists (a name no
    queue can have, too)."""
    def read(**options: str) -> Any:
        return spark.read.format("tieredstore").options(**merged_store.options, **options)

    for topic in ("nope", "no/such"):
        with pytest.raises(Exception, match=rf"unknown topic '{topic}'; topics: audit, orders"):
            read(topic=f"{topic},orders").load().collect()
    with pytest.raises(Exception, match=r"unknown queue orders/7; topic 'orders' has "
                                        r"queues 0, 1, 2"):
        read(topic="orders", queue_id="1,7").load().collect()
    with pytest.raises(Exception, match=r"unknown topic 'nope'; topics: audit, orders"):
        read(topic="nope", queue_id="0").load().collect()
    with pytest.raises(Exception, match=r"unknown queue 5; the store has queues 0, 1, 2"):
        read(queue_id="5").load().collect()
    # A queue id of one of the topics named is known.
    assert read(topic="audit,orders", queue_id="1").load().count() == len(
        merged_store.rows("orders", 1))


def test_bind_resolves_options_here_and_the_class_carries_them_pickled(
        merged_store: BuiltStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No session needed: the registered class, pickled as PySpark pickles it, holds
    the configuration resolved in this process (a relative path made absolute here)."""
    from pyspark import cloudpickle

    from tieredstore.errors import ConfigError

    registered: list[Any] = []
    session = SimpleNamespace(dataSource=SimpleNamespace(register=registered.append))
    monkeypatch.chdir(merged_store.path.parent)
    name = bind(session, {"path": merged_store.path.name, "chunk_size": "8KiB"})
    (source,) = registered
    # Unpickled in a process of its own, as Spark's planning process does.
    shown = subprocess.run(
        [sys.executable, "-c", "import sys, pickle; c = pickle.load(sys.stdin.buffer); "
         "print(c.name(), c.bound.local_path, c.bound.chunk_size)"],
        input=cloudpickle.dumps(source), capture_output=True, check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, cwd="/")
    assert shown.stdout.decode().split() == [name, str(merged_store.path), str(8 * 1024)]
    with pytest.raises(ConfigError, match="memory store lives in one process"):
        bind(session, {"backend": "memory"})
    with pytest.raises(ConfigError, match="holds no tieredstore local store"):
        bind(session, {"path": str(tmp_path)})
