"""One local Spark session for every Spark test, and stores built to read back.

Stores are written with the sync ``MessageStore`` on the local backend with
small segments (64 units per consume-queue segment, 32 KiB commit-log
segments), then closed; the tests read them as a separate process would.
The oracle is what was appended, kept apart from any code under test.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.servers import S3Server
from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.store import MessageStore
from tieredstore.store.formats.record import encode_record

KiB = 1024
T0 = 1_700_000_000_000  # store timestamp of offset 0, ms; offset i is stored at T0 + i s
QUEUES = (("orders", 0), ("orders", 1), ("orders", 2), ("audit", 0))
PER_QUEUE = 220  # 3 sealed consume-queue segments of 64 and a tail of 28
UNITS_PER_SEGMENT = 64


@dataclass(frozen=True, slots=True)
class Written:
    offset: int
    body: bytes
    timestamp: int
    keys: tuple[str, ...]
    tags: str | None
    properties: dict[str, str]


@dataclass(slots=True)
class BuiltStore:
    path: Path
    config: TieredStoreConfig
    messages: dict[tuple[str, int], list[Written]] = field(default_factory=dict)

    @property
    def options(self) -> dict[str, str]:
        return {"path": str(self.path)}

    def rows(self, topic: str | None = None, queue_id: int | None = None, *,
             lo: int = 0, hi: int = 2**62) -> list[tuple[Any, ...]]:
        """Written rows as (topic, queue_id, offset, ts_ms, keys, tags, props, body),
        sorted; offsets in ``[lo, hi)``."""
        out = []
        for (t, q), written in sorted(self.messages.items()):
            if (topic is not None and t != topic) or (queue_id is not None and q != queue_id):
                continue
            out.extend((t, q, w.offset, w.timestamp, list(w.keys), w.tags, w.properties,
                        w.body) for w in written if lo <= w.offset < hi)
        return out

    def record_at(self, topic: str, queue_id: int, position: int) -> int:
        """The offset whose commit-log record holds flat byte ``position`` (records
        lie back to back: a segment rolls at the end of the previous one)."""
        at = 0
        for w in self.messages[(topic, queue_id)]:
            size = len(encode_record(w.offset, w.timestamp, w.body, keys=w.keys, tags=w.tags,
                                     properties=w.properties))
            if at <= position < at + size:
                return w.offset
            at += size
        raise AssertionError(f"byte {position} is past the commit log")


def store_config(path: Path, **overrides: Any) -> TieredStoreConfig:
    settings: dict[str, Any] = {
        "backend": "local", "local_path": str(path), "local_fsync": False,
        "chunk_size": 4 * KiB, "commit_log_max_size": 32 * KiB,
        "consume_queue_max_size": UNITS_PER_SEGMENT * 32, "max_message_size": 8 * KiB,
        "pool_bytes": 256 * KiB, "metadata_page_size": 2, "group_commit_interval": 0.05,
        # Messages are stored at T0 (2023) and later: historical timestamps.
        "timestamp_before_max": float("inf"), "s3_create_bucket": True,
    }
    settings.update(overrides)
    return load_config(env={}, **settings)


def build_store(path: Path, queues: tuple[tuple[str, int], ...] = QUEUES,
                per_queue: int = PER_QUEUE, seed: int = 7, **overrides: Any) -> BuiltStore:
    """Append ``per_queue`` messages to each queue, flush, close."""
    rng = random.Random(seed)
    built = BuiltStore(path, store_config(path, **overrides))
    with MessageStore.open(built.config) as store:
        for topic, queue_id in queues:
            written: list[Written] = []
            for i in range(per_queue):
                body = rng.randbytes(rng.randint(0, 600))
                keys = tuple(f"key-{i}-{k}" for k in range(i % 3))
                tags = None if i % 4 == 0 else f"tag{i % 5}"
                props = {"n": str(i), "queue": f"{topic}/{queue_id}"} if i % 2 else {}
                ts = T0 + i * 1000
                offset = store.append(topic, queue_id, body, keys=keys, tags=tags,
                                      properties=props, timestamp=ts)
                assert offset == i
                written.append(Written(i, body, ts, keys, tags, props))
            built.messages[(topic, queue_id)] = written
    return built


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """local[2] on loopback, UI off, two shuffle partitions."""
    pytest.importorskip("pyspark")
    from tieredstore.spark import get_session

    session = get_session("local[2]", app_name="tieredstore-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def merged_store(tmp_path_factory: pytest.TempPathFactory) -> BuiltStore:
    """Four queues, sealed segments merged (the writer's default), read-only in tests."""
    return build_store(tmp_path_factory.mktemp("merged"))


@contextlib.contextmanager
def moto_lake(options: Mapping[str, str]) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """A moto server in a process of its own holding the bucket ``lake``:
    :func:`lake`'s options."""
    from tests.servers import moto_process

    with moto_process() as s3:
        yield lake(s3, options, "lake")


def lake(server: S3Server, options: Mapping[str, str], bucket: str
         ) -> tuple[dict[str, str], dict[str, str]]:
    """``bucket`` created on ``server``: the store's ``options`` naming the server
    (tables at ``s3://BUCKET/...``), and the same endpoint and keys as delta-rs's
    storage options (to read a table back)."""
    import boto3

    from tests.servers import ACCESS_KEY, SECRET_KEY

    boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1",
                 aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY
                 ).create_bucket(Bucket=bucket)
    return ({**options, "s3_endpoint_url": server.endpoint_url, "s3_region": "us-east-1",
             "s3_access_key_id": ACCESS_KEY, "s3_secret_access_key": SECRET_KEY},
            {"AWS_ENDPOINT_URL": server.endpoint_url, "AWS_ALLOW_HTTP": "true",
             "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": ACCESS_KEY,
             "AWS_SECRET_ACCESS_KEY": SECRET_KEY})
