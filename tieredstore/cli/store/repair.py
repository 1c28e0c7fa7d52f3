"""``tieredstore repair``: rebuild the metadata of queues that lost it, and report.

A queue whose heads are missing, or all damaged, but whose segments are in
the bucket is rebuilt from them (the records of its sealed segments, its owed
merges, where each file goes on after segments retention deleted; see
:mod:`tieredstore.store.write.recovery`), as its next open would do.
This command finds every such queue by listing the store's prefix and
loading the broker's log (a queue's bytes may be in log objects alone), and
opens each one. Opening claims a queue: it takes it over from a writer that still
has it open, so run it with the broker stopped. Queues whose metadata is
fine are left alone. Exit status 1 if a queue could not be rebuilt.

``--json``: ``{"queues": [{"topic", "queue", "why", "records", "max_offset",
"error"}], "rebuilt", "failed"}`` (``error`` empty when rebuilt).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.store import AsyncMessageStore, queues_to_rebuild, recorded_segments

from ..common import (
    EXIT_FAILED,
    EXIT_OK,
    add_metrics_port,
    add_take_over,
    open_existing_store,
    print_json,
    resolve_config,
    table,
)


@dataclass
class Repaired:
    topic: str
    queue: int
    why: str  # "no head" | "every head damaged"
    records: int = 0
    max_offset: int | None = None
    error: str = ""


async def repair(config: TieredStoreConfig, *, take_over: bool = False) -> list[Repaired]:
    async with open_existing_store(config) as probe:
        found = [Repaired(topic, queue_id, why)
                 for topic, queue_id, why in await queues_to_rebuild(probe, config)]
    if not found:
        return found
    async with await AsyncMessageStore.open(config, take_over=take_over) as store:
        for item in found:
            try:  # the open (lazy, on first access) rebuilds it
                item.max_offset = await store.max_offset(item.topic, item.queue)
            except TieredStoreError as exc:
                item.error = str(exc)
    async with open_existing_store(config) as probe:
        for item in found:
            if not item.error:
                item.records = await recorded_segments(probe, config, item.topic, item.queue)
    return found


HELP = ("rebuild the metadata of queues that lost it from their segments (takes the queues "
        "over)")


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    add_metrics_port(parser, "the writer's metrics while it rebuilds queues (none to "
                             "rebuild: no writer is opened and nothing is served)")
    add_take_over(parser)


def run(args: argparse.Namespace) -> int:
    found = sync.run(repair(resolve_config(args), take_over=args.take_over))
    failed = [r for r in found if r.error]
    if args.json:
        print_json({"queues": [asdict(r) for r in found], "rebuilt": len(found) - len(failed),
                    "failed": len(failed)})
        return EXIT_FAILED if failed else EXIT_OK
    if not found:
        print("every queue with segments has valid metadata: nothing to repair")
        return EXIT_OK
    print(table([[r.topic, r.queue, r.why, r.records, r.max_offset,
                  f"FAILED: {r.error}" if r.error else "rebuilt"] for r in found],
                ["topic", "queue", "found", "records", "max offset", "result"]))
    print(f"rebuilt {len(found) - len(failed)} of {len(found)} queue(s)")
    return EXIT_FAILED if failed else EXIT_OK
