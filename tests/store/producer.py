"""A producer process for the restart test; killed with SIGKILL at random.

Appends messages whose bytes depend only on (topic, queue, offset), flushes
every few appends and prints ``F <topic> <queue> <count>`` once offsets below
``count`` are durable.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from tests.store.conftest import small_config
from tieredstore.store import MessageStore

QUEUES = [("alpha", 0), ("alpha", 1), ("beta", 0)]


def message(topic: str, queue: int, offset: int) -> bytes:
    rng = random.Random(f"{topic}/{queue}/{offset}")
    return rng.randbytes(rng.randint(1, 3000))


def config(spec: dict[str, Any]) -> Any:
    """The store the spec names; ``spec["config"]``, if any, overrides keys."""
    extra = spec.get("config", {})
    if spec["backend"] == "local":
        return small_config(backend="local", local_path=spec["root"], local_fsync=True,
                            **extra)
    return small_config(backend="s3", s3_bucket=spec["bucket"], s3_endpoint_url=spec["endpoint"],
                        s3_region="us-east-1", s3_addressing_style="path",
                        s3_access_key_id="x", s3_secret_access_key="y", **extra)


def main(spec: dict[str, Any], seed: int) -> None:
    rng = random.Random(seed)
    with MessageStore.open(config(spec)) as store:
        print("OPEN", flush=True)
        while True:
            topic, queue = rng.choice(QUEUES)
            offset = store.max_offset(topic, queue) if (topic, queue) in store.queues() else 0
            got = store.append(topic, queue, message(topic, queue, offset),
                               keys=[f"k{offset}"], timestamp=1_000_000 + offset)
            assert got == offset
            if rng.random() < 0.05:
                store.flush()
                for t, q in store.queues():
                    print(f"F {t} {q} {store.max_offset(t, q)}", flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), int(sys.argv[2]))
