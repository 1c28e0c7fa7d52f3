"""Store behaviour the CLI's ``recover`` relies on: interrupted merges are finished.

Found while writing ``tieredstore recover`` (which reports merges resumed)
against stores left by a SIGKILLed producer: sealed, recorded segments stayed
unmerged (a ``sealed`` marker and chunks, no ``segment`` object) after a
clean open and close.
"""

from __future__ import annotations

from typing import Any

import pytest

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.metadata import QueueMetadata, QueuePath
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.segment import FileType, SegmentPath, SegmentState, recover_segment
from tieredstore.store import AsyncMessageStore
from tieredstore.store.flatfile import FlatFile

KiB = 1024


def config(**overrides: Any) -> TieredStoreConfig:
    return load_config(env={}, backend="memory", chunk_size=1 * KiB,
                       commit_log_max_size=8 * KiB, consume_queue_max_size=1 * KiB,
                       group_commit_interval=0.01, **overrides)


def first_segment(cfg: TieredStoreConfig) -> SegmentPath:
    return SegmentPath(cfg.cluster, cfg.broker, "t", 0, FileType.COMMIT_LOG, 0,
                       prefix=cfg.key_prefix)


async def fill(ms: AsyncMessageStore) -> None:
    """Enough to roll the commit log: segment 0 is sealed and recorded."""
    for i in range(40):
        await ms.append("t", 0, b"%05d" % i * 60)
    await ms.flush()


async def state(store: ObjectStore, path: SegmentPath) -> SegmentState:
    return (await recover_segment(store, path)).state


async def test_a_merge_listed_in_the_head_is_finished_by_the_next_open() -> None:
    store = MemoryObjectStore()
    cfg = config()
    ms = await AsyncMessageStore.open(cfg.replace(merge_on_seal=False), store=store)
    await fill(ms)
    await ms.close()
    path = first_segment(cfg)
    assert await state(store, path) is SegmentState.SEALING
    # What a crash during the merge leaves: the segment listed as merging.
    meta = await QueueMetadata.open(store, QueuePath(f"{cfg.key_prefix}/meta-root/"
                                                     f"{cfg.cluster}/{cfg.broker}", "t", 0),
                                    writer_id="test")
    await meta.set_properties({"merging.commitlog": "0"})

    ms = await AsyncMessageStore.open(cfg, store=store)
    await ms.close()
    assert await state(store, path) is SegmentState.SEALED


async def test_a_crash_right_after_recording_a_seal_loses_no_merge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The record and the merging.<type> note land in one head write: a crash
    before the merge runs still leaves the merge owed, and the next open does it."""
    store = MemoryObjectStore()
    cfg = config()

    async def crash(self: Any, segment: Any) -> None:
        raise RuntimeError("simulated crash before the merge ran")

    monkeypatch.setattr(FlatFile, "_merge", crash)
    ms = await AsyncMessageStore.open(cfg, store=store)
    await fill(ms)
    await ms.ctx.drain()
    assert await state(store, first_segment(cfg)) is SegmentState.SEALING
    monkeypatch.undo()
    # The crashed process never closes; a new one opens (and claims) the queue.
    ms = await AsyncMessageStore.open(cfg, store=store)
    await ms.close()
    assert await state(store, first_segment(cfg)) is SegmentState.SEALED
