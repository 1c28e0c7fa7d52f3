"""SIGKILL a producer at random moments; every flushed message survives, in order."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_s3_store
from tests.servers import S3Server
from tests.store.conftest import small_config
from tests.store.producer import QUEUES, config, message
from tieredstore.store import AsyncMessageStore

ROOT = Path(__file__).resolve().parents[2]


def run_and_kill(spec: dict[str, Any], seed: int) -> dict[tuple[str, int], int]:
    """Run the producer, SIGKILL it at a random moment; offsets acknowledged durable."""
    rng = random.Random(seed)
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.producer", json.dumps(spec),
                             str(seed)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "OPEN"
    flushed: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + rng.uniform(0.3, 2.5)
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("F "):
            _, topic, queue, count = line.split()
            flushed[(topic, int(queue))] = int(count)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return flushed


async def check(spec: dict[str, Any], flushed: dict[tuple[str, int], int]) -> None:
    store = await AsyncMessageStore.open(config(spec))
    try:
        assert store.corrupt == {}
        for (topic, queue), count in flushed.items():
            top = await store.max_offset(topic, queue)
            assert top >= count, f"{topic}/{queue}: flushed {count}, recovered only {top}"
        for topic, queue in store.queues():
            top = await store.max_offset(topic, queue)
            offset = 0
            while offset < top:
                batch = await store.get(topic, queue, offset, max_count=100)
                for m in batch:
                    assert m.offset == offset
                    assert m.body == message(topic, queue, offset), f"{topic}/{queue}@{offset}"
                    offset += 1
            assert await store.append(topic, queue, b"after restart") == top
        await store.flush()
    finally:
        await store.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
async def test_sigkill_on_local_directory(tmp_path: Path, seed: int) -> None:
    spec = {"backend": "local", "root": str(tmp_path / "data")}
    flushed = run_and_kill(spec, seed)
    assert set(flushed) <= set(QUEUES)
    await check(spec, flushed)
    # And once more: a second crash-free reopen sees the appended message too.
    again = await AsyncMessageStore.open(small_config(backend="local",
                                                      local_path=spec["root"]))
    for topic, queue in again.queues():
        top = await again.max_offset(topic, queue)
        assert (await again.get(topic, queue, top - 1))[0].body == b"after restart"
    await again.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
async def test_sigkill_against_s3(moto: S3Server, seed: int) -> None:
    s3 = await make_s3_store(moto)
    spec = {"backend": "s3", "bucket": s3.bucket, "endpoint": moto.endpoint_url}
    await s3.close()
    await check(spec, run_and_kill(spec, seed))
