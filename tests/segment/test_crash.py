"""SIGKILL a writer at random points during commits and seals; nothing acknowledged is lost.

After reopening, every byte whose commit had returned reads back exactly, and
once recovery (and a final seal) has run no chunk or multipart upload is left.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import make_s3_store
from tests.segment.crash_writer import plan
from tests.segment.helpers import seg_path
from tests.servers import S3Server
from tieredstore.objectstore import LocalObjectStore, ObjectStore
from tieredstore.segment import ChunkedSegment, SegmentOptions

ROOT = Path(__file__).resolve().parents[2]
SEEDS = range(5)


def run_and_kill(spec: dict[str, str], seed: int, seal: bool) -> tuple[int, list[str]]:
    """Start the writer, kill it at a random moment, return the last acked end."""
    rng = random.Random(seed * 7919 + seal)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.segment.crash_writer", json.dumps(spec), str(seed),
         "seal" if seal else "commit"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    # Kill during commits: after a random number of acks. During a seal: a
    # random delay after it began.
    kill_after_acks = rng.randint(1, 35) if not seal else None
    while True:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if kill_after_acks is not None and len(lines) >= kill_after_acks:
            time.sleep(rng.uniform(0, 0.05))
            break
        if line.strip() == "S":
            time.sleep(rng.uniform(0, 0.4))
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    acked = max((int(x.split()[1]) for x in lines if x.startswith("C")), default=0)
    return acked, lines


async def check_recovery(store: ObjectStore, seed: int, acked: int) -> None:
    expected = b"".join(plan(seed))
    segment = await ChunkedSegment.open(store, seg_path(),
                                        options=SegmentOptions(chunk_size=256 * 1024))
    assert segment.commit_position >= acked, "an acknowledged commit was lost"
    got = await segment.read0(0, segment.commit_position)
    assert got == expected[: segment.commit_position], "bytes differ from what was written"
    await segment.seal()
    names = [o.key.rsplit("/", 1)[1] for o in await store.list_all(seg_path().base_dir)]
    assert names == ["segment"], f"left behind: {names}"
    assert await store.list_multipart_uploads("") == []
    assert await segment.read0(0, acked) == expected[:acked]


@pytest.mark.slow
@pytest.mark.parametrize("seal", [False, True], ids=["during-commits", "during-seal"])
@pytest.mark.parametrize("seed", SEEDS)
async def test_sigkill_on_local_directory(tmp_path: Path, seed: int, seal: bool) -> None:
    spec = {"backend": "local", "root": str(tmp_path / "store")}
    acked, lines = run_and_kill(spec, seed, seal)
    assert lines, "the writer printed nothing"
    store = LocalObjectStore(tmp_path / "store")
    await check_recovery(store, seed, acked)
    leftovers = os.listdir(tmp_path / "store" / "tmp")
    # Only temporaries the kill cut short (named <store's random hex>-<count>).
    assert all(re.fullmatch(r"[0-9a-f]{32}-[0-9]+", x) for x in leftovers), leftovers


@pytest.mark.slow
@pytest.mark.parametrize("seal", [False, True], ids=["during-commits", "during-seal"])
@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_sigkill_against_s3(moto: S3Server, seed: int, seal: bool) -> None:
    store = await make_s3_store(moto)
    spec = {"backend": "s3", "bucket": store.bucket, "endpoint": moto.endpoint_url}
    acked, _ = run_and_kill(spec, seed, seal)
    try:
        await check_recovery(store, seed, acked)
    finally:
        await store.close()
