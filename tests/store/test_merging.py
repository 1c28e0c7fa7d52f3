"""Merges owed after a seal: none is left stale, none is lost.

Thousands of rolls with their merges running concurrently leave no stale
``merging.<type>`` entry: the property is updated under the metadata's lock.
A merge that a crash interrupts, or never let start, is finished by the next
open (found while writing ``tieredstore recover`` against stores left by a
SIGKILLed producer: sealed, recorded segments stayed unmerged, a ``sealed``
marker and chunks but no ``segment`` object, after a clean open and close).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.store.conftest import small_config
from tieredstore.config import TieredStoreConfig
from tieredstore.metadata import QueueMetadata, QueuePath
from tieredstore.objectstore import (
    LocalObjectStore,
    MemoryObjectStore,
    ObjectInfo,
    ObjectStore,
    PartInfo,
)
from tieredstore.segment import FileType, SegmentState
from tieredstore.store import (
    AsyncMessageStore,
    list_flat_file,
    merges_owed,
    metadata_root,
    open_metadata,
)

KiB = 1024


@pytest.mark.parametrize("kind", ["memory", "local"])
async def test_2600_rolls_with_concurrent_merges_leave_no_stale_entry(kind: str,
                                                                      tmp_path: Path) -> None:
    backend: ObjectStore = (MemoryObjectStore() if kind == "memory"
                            else LocalObjectStore(tmp_path, fsync=False))
    # 1 KiB segments of both files: every few messages roll both, and each roll
    # starts a merge in the background while the next rolls go on.
    config = small_config(commit_log_max_size=1024, consume_queue_max_size=1024,
                          chunk_size=1024, max_message_size=512, gc_interval=0)
    store = await AsyncMessageStore.open(config, store=backend)
    count = 5000  # two records a commit-log segment, 32 units a consume-queue one
    for i in range(count):
        await store.append("t", 0, b"x" * 400)
        if i % 50 == 0:
            await store.flush()
    await store.close()  # drains the merges
    head = await QueueMetadata.open_read_only(backend, QueuePath(metadata_root(config), "t", 0))
    rolls = 0
    for file_type in head.file_types:
        rolls += len([r async for r in head.records(file_type)])
    assert rolls >= 2600
    stale = {k: v for k, v in head.properties.items() if k.startswith("merging.") and v}
    assert stale == {}, f"{sum(len(v.split(',')) for v in stale.values())} stale entries"
    puts_before = backend.metrics.total_requests("put")
    again = await AsyncMessageStore.open(config, store=backend)
    got = await again.get("t", 0, 0, max_count=count)
    assert len(got) == count
    await again.close()
    # the reopen writes its claim and fences and its liveness record (at open and
    # close), not a head per stale merge
    assert backend.metrics.total_requests("put") - puts_before <= 8


# --- merges a crash interrupted -------------------------------------------------------


class MergeCrash(Exception):
    """The process 'died' in a merge."""


class CrashingMerges(MemoryObjectStore):
    """While ``crash_at`` is set, every merge dies where a crash would stop it:
    ``"begin"`` before its upload begins, ``"complete"`` with its parts uploaded
    and the upload never completed nor aborted (left behind, as a crash leaves it)."""

    def __init__(self) -> None:
        super().__init__()
        self.crash_at: str | None = None

    async def create_multipart(self, key: str, *,
                               metadata: Mapping[str, str] | None = None) -> str:
        if self.crash_at == "begin":
            raise MergeCrash(f"before the merge of {key} began")
        return await super().create_multipart(key, metadata=metadata)

    async def complete_multipart(self, key: str, upload_id: str, parts: Sequence[PartInfo], *,
                                 if_none_match: bool = False) -> ObjectInfo:
        if self.crash_at == "complete":
            raise MergeCrash(f"before the merge of {key} completed")
        return await super().complete_multipart(key, upload_id, parts,
                                                if_none_match=if_none_match)

    async def abort_multipart(self, key: str, upload_id: str) -> None:
        if self.crash_at == "complete":
            raise MergeCrash(f"before the upload of {key} was aborted")
        await super().abort_multipart(key, upload_id)


def crash_config(**overrides: Any) -> TieredStoreConfig:
    return small_config(chunk_size=1 * KiB, commit_log_max_size=8 * KiB,
                        consume_queue_max_size=1 * KiB, group_commit_interval=0.01,
                        **overrides)


async def fill(ms: AsyncMessageStore) -> None:
    """Enough to roll the commit log: its segment 0 is sealed and recorded."""
    for i in range(40):
        await ms.append("t", 0, b"%05d" % i * 60)
    await ms.flush()


async def first_commit_log_segment(store: ObjectStore, config: TieredStoreConfig
                                   ) -> SegmentState:
    return (await list_flat_file(store, config, "t", 0, FileType.COMMIT_LOG))[0].state


async def owed(store: ObjectStore, config: TieredStoreConfig) -> int:
    """How many merges the queue's head in the bucket lists as owed."""
    return merges_owed((await open_metadata(store, config, "t", 0)).properties)


async def test_a_merge_a_crash_interrupted_is_finished_by_the_next_open() -> None:
    store = CrashingMerges()
    config = crash_config()
    store.crash_at = "complete"
    ms = await AsyncMessageStore.open(config, store=store)
    await fill(ms)
    await ms.close()  # waits for the merges: they died
    assert await first_commit_log_segment(store, config) is SegmentState.SEALING
    assert await owed(store, config) >= 1, "the head does not list the merge as owed"
    assert await store.list_multipart_uploads(""), "the interrupted upload was not left"

    store.crash_at = None
    ms = await AsyncMessageStore.open(config, store=store)
    await ms.wait_idle()  # its claim of the queue, in the background, resumes the merge
    await ms.close()
    assert await first_commit_log_segment(store, config) is SegmentState.SEALED
    assert await owed(store, config) == 0
    assert await store.list_multipart_uploads("") == []


async def test_a_crash_right_after_recording_a_seal_loses_no_merge() -> None:
    """The record and the merging.<type> note land in one head write: a crash
    before the merge runs still leaves the merge owed, and the next open does it."""
    store = CrashingMerges()
    config = crash_config()
    store.crash_at = "begin"
    ms = await AsyncMessageStore.open(config, store=store)
    await fill(ms)
    await ms.wait_idle()
    assert await first_commit_log_segment(store, config) is SegmentState.SEALING
    store.crash_at = None
    # The crashed process never closes; a new one opens (and claims) the queue.
    ms = await AsyncMessageStore.open(config, store=store)
    await ms.wait_idle()  # the claim, in the background, resumes the merge
    await ms.close()
    assert await first_commit_log_segment(store, config) is SegmentState.SEALED
    assert await owed(store, config) == 0
