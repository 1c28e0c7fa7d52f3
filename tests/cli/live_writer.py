"""A writer process for the live-reader test: appends to three queues with small
segments (so it rolls and merges all the time) until its time is up."""

from __future__ import annotations

import random
import sys
import time

from tieredstore.config import load_config
from tieredstore.store import MessageStore


def main(root: str, seconds: float) -> None:
    config = load_config(env={}, backend="local", local_path=root, local_fsync=False,
                         chunk_size=4096, commit_log_max_size=32 * 1024,
                         consume_queue_max_size=64 * 32, pool_bytes=256 * 1024,
                         max_message_size=8192, group_commit_interval=0.02,
                         metadata_page_size=4, gc_interval=0)
    rng = random.Random(1)
    with MessageStore.open(config) as store:
        end = time.monotonic() + seconds
        rounds = 0
        while rounds == 0 or time.monotonic() < end:
            for queue in range(3):
                store.append("t", queue, rng.randbytes(rng.randint(10, 1500)))
            rounds += 1
            if rounds == 1:  # every queue durable before a reader looks
                store.flush()
                print("OPEN", flush=True)
            elif rounds % 20 == 0:
                store.flush()
    print(f"DONE {rounds}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
