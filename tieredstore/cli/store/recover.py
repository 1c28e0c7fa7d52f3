"""``tieredstore recover``: open the store, as a host would, and say what recovery did.

Opening recovers every queue found in the bucket: it claims the queue
(fencing any earlier writer), rebuilds offsets and commit positions, resumes
interrupted seals and merges, re-dispatches commit-log records the consume
queue had not caught up with. Closing finishes the merges it started.

Reported per queue: offsets after recovery; ``durable before``, the max
offset a read-only look saw before opening (re-dispatched messages are the
difference); merges the metadata listed as unfinished before, and sealed
segments still unmerged after closing (read from the object names). A queue
whose data is inconsistent is reported as corrupt, with why; one that reads
around bytes missing from the bucket as damaged, with what is missing; the
exit code is then 1.

``--json``: ``{"queues": [{"topic", "queue", "state" (ok, damaged, corrupt),
"reason", "min_offset", "max_offset", "commit_offset", "durable_before",
"merges_pending_before", "unmerged_after"}], "requests": {operation: count}}``.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.store import (
    AsyncMessageStore,
    ObjectStore,
    QueueView,
    listed_queues,
    merges_owed,
    sealing_segments,
)

from ..common import (
    EXIT_FAILED,
    EXIT_OK,
    add_metrics_port,
    add_take_over,
    format_requests,
    open_existing_store,
    print_json,
    resolve_config,
    table,
)


@dataclass
class QueueRecovery:
    topic: str
    queue: int
    state: str = "ok"  # ok | damaged (read around what is missing) | corrupt
    reason: str = ""
    min_offset: int | None = None
    max_offset: int | None = None
    commit_offset: int | None = None
    durable_before: int | None = None  # max offset a read-only view saw before the open
    merges_pending_before: int = 0  # listed in the metadata as unfinished
    unmerged_after: int = 0  # sealed segments without a merged object after close


async def _before(store: ObjectStore, config: TieredStoreConfig, topic: str, queue_id: int
                  ) -> tuple[int | None, int]:
    """What a read-only look sees before recovery: max offset, unfinished merges."""
    try:
        view = await QueueView.open(store, config, topic, queue_id)
    except TieredStoreError:
        return None, 0
    return view.max_offset, merges_owed(view.meta.properties)


async def recover(config: TieredStoreConfig, *, take_over: bool = False
                  ) -> tuple[list[QueueRecovery], dict[str, Any]]:
    async with open_existing_store(config) as probe:
        before = {key: await _before(probe, config, *key)
                  for key in await listed_queues(probe, config)}
    results: list[QueueRecovery] = []
    async with await AsyncMessageStore.open(config, take_over=take_over) as store:
        # The listed queues too: one whose open failed (bytes failing their
        # CRC32C, say) is not among the store's queues, and is reported by
        # trying it again, as the next access would.
        for topic, queue_id in sorted({*store.queues(), *before}):
            result = QueueRecovery(topic, queue_id)
            result.durable_before, result.merges_pending_before = before.get(
                (topic, queue_id), (None, 0))
            if (topic, queue_id) in store.corrupt:
                result.state = "corrupt"
                result.reason = str(store.corrupt[(topic, queue_id)])
                results.append(result)
                continue
            try:
                result.min_offset = await store.min_offset(topic, queue_id)
                result.max_offset = await store.max_offset(topic, queue_id)
                result.commit_offset = await store.commit_offset(topic, queue_id)
            except TieredStoreError as exc:
                result.state, result.reason = "corrupt", str(exc)
            else:
                damage = store.damaged.get((topic, queue_id))
                if damage:
                    result.state, result.reason = "damaged", "; ".join(damage)
            results.append(result)
    requests = store.snapshot()["requests"]
    async with open_existing_store(config) as probe:
        for result in results:
            result.unmerged_after = await sealing_segments(probe, config, result.topic,
                                                           result.queue)
    return results, requests


HELP = "open the store (recovery) and report; exit 1 if a queue is corrupt"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    add_metrics_port(parser, "the recovering writer's metrics (docs/metrics.md)")
    add_take_over(parser)


def run(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    results, requests = sync.run(recover(config, take_over=args.take_over))
    corrupt = [r for r in results if r.state == "corrupt"]
    failed = [r for r in results if r.state != "ok"]
    if args.json:
        print_json({"queues": [asdict(r) for r in results],
                    "requests": requests.get("requests", {})})
        return EXIT_FAILED if failed else EXIT_OK
    print(table([[r.topic, r.queue, r.min_offset, r.max_offset,
                  r.commit_offset, r.durable_before, r.merges_pending_before,
                  r.unmerged_after, r.state.upper() if r.state != "ok" else r.state]
                 for r in results],
                ["topic", "queue", "min", "max", "commit", "durable before",
                 "merging before", "unmerged after", "state"]) if results else "no queues")
    redispatched = sum(r.max_offset - r.durable_before for r in results
                       if r.max_offset is not None and r.durable_before is not None)
    unmerged = sum(r.unmerged_after for r in results)
    print(f"recovered {len(results) - len(corrupt)} of {len(results)} queues; "
          f"{redispatched} messages re-dispatched to consume queues; "
          f"{sum(r.merges_pending_before for r in results)} merges were unfinished, "
          f"{unmerged} sealed segments are unmerged now; {len(corrupt)} corrupt")
    if unmerged:
        print("  (unmerged segments read fine from their chunks; the store did not finish "
              "their merge)")
    for r in failed:
        print(f"{r.state.upper()} {r.topic}/{r.queue}: {r.reason}")
    print(f"requests: {format_requests(requests)}")
    return EXIT_FAILED if failed else EXIT_OK
