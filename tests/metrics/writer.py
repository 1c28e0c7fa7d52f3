"""A writer process for the exporter test, driven line by line on stdin.

``append N``: N messages to each of three queues, then a flush; it answers
``FLUSHED`` and the queues' max offsets. ``close``: closes the store (a fenced
flush raises there) and answers ``DONE``. It opens with one round appended and
flushed, and says ``OPEN``.
"""

from __future__ import annotations

import sys

from tieredstore.config import load_config
from tieredstore.store import MessageStore

QUEUES = 3


def main(root: str) -> None:
    config = load_config(env={}, backend="local", local_path=root, local_fsync=False,
                         chunk_size=4096, commit_log_max_size=32 * 1024,
                         consume_queue_max_size=64 * 32, pool_bytes=256 * 1024,
                         max_message_size=8192, group_commit_interval=0.02,
                         metadata_page_size=4, gc_interval=0)
    with MessageStore.open(config) as store:

        def append(n: int) -> list[int]:
            for i in range(n):
                for queue in range(QUEUES):
                    store.append("t", queue, bytes([i % 256]) * (100 + 37 * queue))
            store.flush()
            return [store.max_offset("t", q) for q in range(QUEUES)]

        append(40)
        print("OPEN", flush=True)
        for line in sys.stdin:
            command, _, arg = line.strip().partition(" ")
            if command == "append":
                print("FLUSHED", *append(int(arg)), flush=True)
            elif command == "close":
                break
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
