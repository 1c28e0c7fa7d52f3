"""The store applies a topic's table: its retention deletes its segments and not
another topic's; its segment size rolls its commit log; its chunk size cuts its
chunk objects. Configured through the file, as an operator does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tieredstore.config import KiB, TieredStoreConfig, load_config
from tieredstore.metadata import SegmentRecord
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.segment import FileType
from tieredstore.store import AsyncMessageStore, open_metadata

T0 = 1_700_000_000_000  # ms
BODY = b"m" * 900


def config_from(tmp_path: Path, text: str, **overrides: Any) -> TieredStoreConfig:
    path = tmp_path / "c.toml"
    path.write_text(text)
    base: dict[str, Any] = {"backend": "memory", "chunk_size": 4 * KiB,
                            "commit_log_max_size": 32 * KiB, "consume_queue_max_size": 32 * 64,
                            "pool_bytes": 256 * KiB,
                            "max_message_size": 4 * KiB, "group_commit_interval": 0.02,
                            "timestamp_before_max": float("inf"), "retention_interval": 0.0,
                            "gc_interval": 0.0}
    base.update(overrides)
    return load_config(path, env={}, **base)


async def fill(store: AsyncMessageStore, topics: tuple[str, ...], n: int) -> None:
    for topic in topics:
        for i in range(n):
            await store.append(topic, 0, BODY, timestamp=T0 + i)
    await store.flush()
    await store.wait_idle()


async def sealed(backend: ObjectStore, config: TieredStoreConfig, topic: str
                 ) -> list[SegmentRecord]:
    meta = await open_metadata(backend, config, topic, 0)
    return [r async for r in meta.records(FileType.COMMIT_LOG)]


async def test_a_topics_retention_deletes_its_segments_and_not_another_topics(
        tmp_path: Path) -> None:
    config = config_from(tmp_path, 'file_reserved_time = "30d"\n'
                                   '[topics."short"]\nfile_reserved_time = "1h"\n')
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(config, store=backend)
    try:
        await fill(store, ("short", "long"), 120)
        assert len(await sealed(backend, config, "short")) >= 2
        two_hours_later = T0 / 1000 + 2 * 3600
        deleted = await store.delete_expired(now=two_hours_later)
        assert deleted >= 2
        assert await store.min_offset("short", 0) > 0
        assert await store.min_offset("long", 0) == 0
        # code's topic_reserved_time still overrides the file's table
        store.topic_reserved_time = {"long": 60.0}
        assert await store.delete_expired(now=two_hours_later) >= 1
        assert await store.min_offset("long", 0) > 0
    finally:
        await store.close()


async def test_a_topics_segment_size_rolls_its_commit_log_at_that_size(tmp_path: Path) -> None:
    config = config_from(tmp_path, '[topics."small"]\ncommit_log_max_size = "8KiB"\n')
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(config, store=backend)
    try:
        await fill(store, ("small", "other"), 100)
        small = await sealed(backend, config, "small")
        other = await sealed(backend, config, "other")
    finally:
        await store.close()
    assert small and all(8 * KiB - 1 * KiB < r.size <= 8 * KiB for r in small), \
        [r.size for r in small]
    assert other and all(r.size > 8 * KiB for r in other), [r.size for r in other]
    assert len(small) > 3 * len(other)


async def test_a_topics_chunk_size_cuts_its_chunk_objects(tmp_path: Path) -> None:
    config = config_from(tmp_path, '[topics."fine"]\nchunk_size = "1KiB"\n',
                         write_mode="direct", merge_on_seal=False,
                         commit_log_max_size=1024 * KiB, max_message_size=KiB)
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(config, store=backend)
    try:
        for topic in ("fine", "coarse"):
            for i in range(20):
                await store.append(topic, 0, b"x" * 800, timestamp=T0 + i)
            await store.flush()
    finally:
        await store.close()
    keys = [o.key for o in await backend.list_all("")]

    def chunks(topic: str) -> int:
        where = f"/{topic}/0/{FileType.COMMIT_LOG.label}/"
        return sum(1 for k in keys if where in k and "/chunk-" in k)

    assert chunks("fine") >= 16, keys
    assert 0 < chunks("coarse") <= 6, keys
