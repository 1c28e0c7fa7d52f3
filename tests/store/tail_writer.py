"""A log-mode writer for the durable-tail test; killed with SIGKILL.

Appends to one busy queue without flushing and prints ``C <commit_offset>``
as the broker's group commits make offsets durable. Bodies depend only on the
offset (:func:`body`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tests.store.conftest import small_config
from tieredstore.config import TieredStoreConfig
from tieredstore.store import AsyncMessageStore

TOPIC, QUEUE = "busy", 0


def body(offset: int) -> bytes:
    return offset.to_bytes(8, "big") * (1 + offset % 64)


def config(root: str, **overrides: Any) -> TieredStoreConfig:
    """Log mode on a local directory, with segments and chunks small enough that
    a busy queue's consume queue is held behind its commit log."""
    base: dict[str, Any] = {
        "backend": "local", "local_path": root, "write_mode": "log",
        "chunk_size": 16 * 1024, "direct_commit_size": 16 * 1024, "chunk_wait": 60.0,
        "commit_log_max_size": 256 * 1024, "consume_queue_max_size": 1024 * 1024,
        "pool_bytes": 4 * 1024 * 1024}
    base.update(overrides)
    return small_config(**base)


async def main(root: str, overrides: dict[str, Any]) -> None:
    async with await AsyncMessageStore.open(config(root, **overrides)) as store:
        print("OPEN", flush=True)
        offset, said = 0, -1
        while True:
            await store.append(TOPIC, QUEUE, body(offset))
            offset += 1
            if offset % 50 == 0:
                await asyncio.sleep(0.001)
                committed = await store.commit_offset(TOPIC, QUEUE)
                if committed != said:
                    print(f"C {committed}", flush=True)
                    said = committed


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}))
