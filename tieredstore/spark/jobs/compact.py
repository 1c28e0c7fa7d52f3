"""Compact: merge sealed segments whose merge never ran or never finished.

The driver finds them with the store's :func:`~tieredstore.store.unmerged_segments`
(its docstring says which segments it picks and which it never touches); each
is merged by one Spark task through :func:`~tieredstore.store.merge_segment`.
Run it against a store whose writer does not merge the same segments at the
same moment; if one does, the later merge finds the same object in place and
succeeds, but the writer's cached chunk layout of that segment goes stale.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.spark.options import on_store
from tieredstore.spark.read.plan import find_queues
from tieredstore.spark.read.selection import Selection
from tieredstore.store import (
    ObjectStore,
    Unmerged,
    UnmergedSurvey,
    merge_segment,
    unmerged_segments,
)


@dataclass(frozen=True, slots=True)
class CompactResult:
    """What a task did to one segment (a row of the compact table)."""

    topic: str
    queue_id: int
    file_type: str
    base_offset: int
    state: str
    chunks: int
    merged: bool
    parts: int
    bytes_copied: int
    bytes_reuploaded: int
    error: str | None


async def survey(store: ObjectStore, config: TieredStoreConfig, selection: Selection
                 ) -> UnmergedSurvey:
    """Find sealed segments left unmerged in the selected queues of ``config``'s
    broker (compact works on one broker's segments)."""
    out = UnmergedSurvey()
    mine = dataclasses.replace(selection, brokers=frozenset({config.broker}))
    for _, topic, queue_id in await find_queues(store, config, mine):
        await unmerged_segments(store, config, topic, queue_id, out)
    return out


def compact_segment(settings: TieredStoreConfig, target: Unmerged) -> CompactResult:
    """Merge one segment (runs in a task, on a loop and store of its own)."""
    try:
        merged, stats = on_store(settings, lambda store: merge_segment(store, settings, target))
    except (TieredStoreError, OSError) as exc:
        return compact_result(target, merged=False, error=f"{type(exc).__name__}: {exc}")
    return compact_result(target, merged=merged, parts=stats.parts if stats else 0,
                          copied=stats.bytes_copied if stats else 0,
                          uploaded=stats.bytes_reuploaded if stats else 0,
                          error=None if merged else "still not merged")


def compact_result(target: Unmerged, *, merged: bool, parts: int = 0, copied: int = 0,
                   uploaded: int = 0, error: str | None) -> CompactResult:
    """What was done to ``target`` (nothing, by default)."""
    return CompactResult(target.topic, target.queue_id, target.file_type, target.base_offset,
                         target.state, target.chunks, merged, parts, copied, uploaded, error)
