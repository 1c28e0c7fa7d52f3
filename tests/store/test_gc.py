"""Garbage collection: what no metadata references and is older than the safety age."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.store.conftest import small_config
from tieredstore.objectstore import LocalObjectStore, MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore
from tieredstore.store.ops.gc import (
    BESIDE_MERGED,
    DEAD_LOG,
    LOG_FENCE,
    TEMPORARY,
    TRIMMED,
    UPLOAD,
)

DAY = 86_400.0
LOG_KINDS = {DEAD_LOG, LOG_FENCE}  # the writer's own log: spent objects, fences below its newest
T0 = 1_700_000_000_000


class Crash(Exception):
    """The process died here."""


class DeletesCrash(MemoryObjectStore):
    """A bucket whose segment deletes crash while ``crashing`` is set."""

    crashing = False
    crashes_on = "/seg-"

    async def delete_many(self, keys: Sequence[str]) -> None:
        if self.crashing and any(self.crashes_on in k for k in keys):
            raise Crash("died before deleting")
        await super().delete_many(keys)


async def produce(store: AsyncMessageStore, count: int, *, queue: int = 0) -> None:
    for i in range(count):
        await store.append("t", queue, b"m" * 700, timestamp=T0 + i * 1000)
    await store.flush()


async def segment_dirs(backend: ObjectStore) -> set[str]:
    return {o.key.rsplit("/", 1)[0] for o in await backend.list_all("") if "/seg-" in o.key}


async def test_a_crash_between_the_retention_trim_and_its_deletes() -> None:
    backend = DeletesCrash()
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    await produce(store, 300)
    before = await segment_dirs(backend)
    backend.crashing = True
    with pytest.raises(Crash):  # the first pointers moved; the segments stay
        await store.delete_expired(now=T0 / 1000 + 250 + 72 * 3600)
    backend.crashing = False
    assert await segment_dirs(backend) == before

    again = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    await again.wait_idle()  # its claims, in the background
    # Opening claims the active segments: in the log mode one may have had no object.
    opened = await segment_dirs(backend)
    assert before <= opened
    before = opened
    first = await again.min_offset("t", 0)
    assert first > 0
    young = await again.collect_garbage()  # default safety age: nothing is old enough
    assert young.found == []
    dry = await again.collect_garbage(dry_run=True, safety_age=0)
    trimmed = [g for g in dry.found if g.kind == TRIMMED]
    assert trimmed and dry.deleted == 0
    assert await segment_dirs(backend) == before  # a dry run deletes nothing
    # The writer's own log objects that nothing needs (compacted, or trimmed) and the
    # fences below its newest entry go too: its maintenance would delete them later.
    assert {g.kind for g in dry.found} <= {TRIMMED, DEAD_LOG, LOG_FENCE}
    done = await again.collect_garbage(safety_age=0)
    assert done.deleted == len(done.found) == len(dry.found)
    gone = {g.key.rstrip("/") for g in trimmed}
    assert await segment_dirs(backend) == before - gone
    assert (await again.collect_garbage(safety_age=0)).found == []
    got = await again.get("t", 0, first, max_count=1000)
    assert [m.offset for m in got] == list(range(first, 300))
    await again.close()


async def test_chunks_beside_a_merged_object_and_stale_uploads() -> None:
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    await produce(store, 200)
    await store.wait_idle()  # merges done
    merged = sorted(o.key for o in await backend.list_all("") if o.key.endswith("/segment"))
    assert merged
    directory = merged[0].rsplit("/", 1)[0]
    stray = f"{directory}/chunk-{0:020d}"
    await backend.put(stray, b"left by an interrupted cleanup")
    await backend.put(f"{directory}/sealed", b'{"size": 1, "format": "sealed-v1"}')
    upload_id = await backend.create_multipart(merged[-1] + "-upload-of-a-dead-writer")
    report = await store.collect_garbage(safety_age=0)
    kinds = {k: n for k, n in report.by_kind().items() if k not in LOG_KINDS}
    assert kinds == {BESIDE_MERGED: 1, UPLOAD: 1}, report.found  # one item per segment
    names = {o.key for o in await backend.list_all(directory + "/")}
    assert stray not in names and f"{directory}/segment" in names
    assert f"{directory}/sealed" not in names
    assert all(u.upload_id != upload_id for u in await backend.list_multipart_uploads(""))
    await store.close()
    again = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    assert len(await again.get("t", 0, 0, max_count=1000)) == 200
    await again.close()


async def test_a_clean_store_has_no_garbage_and_fences_stay() -> None:
    backend = MemoryObjectStore()
    for _ in range(3):  # three opens: three fences in the active segments
        store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
        await produce(store, 120)
        await store.close()
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    await store.wait_idle()  # its claims, in the background
    before = {o.key for o in await backend.list_all("")}
    report = await store.collect_garbage(safety_age=0)
    # Only the log's spent objects and old fences: every segment object stays,
    # the chunk series' fences with them, and the log's newest entry.
    assert {g.kind for g in report.found} <= LOG_KINDS
    logs = sorted(k for k in before if "/log/log-" in k)
    assert {o.key for o in await backend.list_all("")} == before - {
        g.key for g in report.found}
    assert logs[-1] not in {g.key for g in report.found}
    await store.close()
    again = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    assert len(await again.get("t", 0, 0, max_count=1000)) == 360
    await again.close()


async def test_the_local_backends_temporary_files(tmp_path: Path) -> None:
    backend = LocalObjectStore(tmp_path, fsync=False)
    config = small_config(backend="local", local_path=str(tmp_path), gc_interval=0)
    store = await AsyncMessageStore.open(config, store=backend)
    await produce(store, 10)
    old = tmp_path / "tmp" / "killed-writer-leftover"
    old.write_bytes(b"half a chunk")
    os.utime(old, (time.time() - DAY, time.time() - DAY))
    fresh = tmp_path / "tmp" / "being-written"
    fresh.write_bytes(b"in flight")
    report = await store.collect_garbage(safety_age=3600)
    assert [(g.kind, g.key) for g in report.found] == [(TEMPORARY, old.name)]
    assert not old.exists() and fresh.exists()
    await store.close()


class IndexDeletesCrash(DeletesCrash):
    """A bucket whose key-index segment deletes crash while ``crashing`` is set."""

    crashes_on = "/index/seg-"


async def test_trimmed_key_index_segments_are_collected_too() -> None:
    backend = IndexDeletesCrash()
    config = small_config(gc_interval=0, index_max_size=1024)
    store = await AsyncMessageStore.open(config, store=backend)
    for i in range(300):
        await store.append("t", 0, b"m" * 700, keys=[f"k{i}"], timestamp=T0 + i * 1000)
    await store.flush()
    await store.wait_idle()
    backend.crashing = True
    with pytest.raises(Crash):
        await store.delete_expired(now=T0 / 1000 + 250 + 72 * 3600)
    backend.crashing = False
    again = await AsyncMessageStore.open(config, store=backend)
    await again.wait_idle()  # its claims, in the background
    index_dirs = {d for d in await segment_dirs(backend) if "/index/" in d}
    done = await again.collect_garbage(safety_age=0)
    trimmed = {g.key.rstrip("/") for g in done.found if g.kind == TRIMMED}
    assert {d for d in trimmed if "/index/" in d}, "no index segment was collected"
    assert {d for d in await segment_dirs(backend) if "/index/" in d} == \
        index_dirs - trimmed
    first = await again.min_offset("t", 0)
    assert [m.offset for m in await again.query_by_key("t", "k299")] == [299]
    assert await again.query_by_key("t", f"k{first - 1}") == []
    await again.close()
