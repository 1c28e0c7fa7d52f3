"""A log-mode writer for the durable-tail tests; killed with SIGKILL.

Appends to one busy queue without flushing and prints ``C <commit_offset>``
as the broker's group commits make offsets durable. Bodies depend only on the
offset (:func:`body`). :func:`run_and_kill` runs it in a process of its own.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.store.conftest import KiB, small_config
from tieredstore.config import TieredStoreConfig
from tieredstore.store import AsyncMessageStore

TOPIC, QUEUE = "busy", 0
ROOT = Path(__file__).resolve().parents[2]
RUN_SECONDS = 2.0
# A consume-queue chunk of 64 KiB holds 3,276 units: chunk_wait holds that many
# behind the commit log, whose chunks land every 64 KiB of records.
WRITER = {"chunk_size": 64 * KiB, "direct_commit_size": 64 * KiB}


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


def run_and_kill(root: Path) -> list[int]:
    """Run the writer (with :data:`WRITER`) on directory ``root``, SIGKILL it after
    :data:`RUN_SECONDS`; the commit offsets it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.tail_writer", str(root),
                             json.dumps(WRITER)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "OPEN"
        said: list[int] = []
        deadline = time.monotonic() + RUN_SECONDS
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("C "):
                said.append(int(line.split()[1]))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return said


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
