"""``tieredstore metrics`` beside a live writer: the per-queue series move between
scrapes, the exporter writes nothing, and the writer is not fenced.

The writer is a process of its own (tests/metrics/writer.py, as
tests/cli/test_live.py does it), the exporter the command itself, run as a
subprocess on a free port; without ``--listen`` it prints one pass, the same values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import free_port
from tieredstore.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUEUES = 3
# Requests one pass may make (measured: docs/metrics.md): after a writer's
# changes, and over a bucket that did not change since the pass before; 3 more
# each: the LIST of the cluster's brokers, and the LIST and GET of the broker's
# newest writer's liveness record.
PASS_REQUESTS_MAX = 5 + 12 * QUEUES
IDLE_PASS_REQUESTS_MAX = 5 + 5 * QUEUES

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def queue(samples: Samples, name: str, queue_id: int) -> float:
    key = (f"tieredstore_queue_{name}",
           (("broker", "broker-0"), ("queue", str(queue_id)), ("topic", "t")))
    assert key in samples, f"no {key} in {sorted(k for k in samples if 'queue_' in k[0])}"
    return samples[key]


def requests(samples: Samples, *ops: str) -> float:
    return sum(v for (name, labels), v in samples.items()
               if name == "tieredstore_store_requests_total" and dict(labels)["op"] in ops)


class Writer:
    """The writer process, one command a line."""

    def __init__(self, data: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.metrics.writer", str(data)], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.read() == "OPEN"

    def read(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def send(self, line: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.read()

    def append(self, n: int) -> list[int]:
        answer = self.send(f"append {n}").split()
        assert answer[:1] == ["FLUSHED"], f"the writer answered {answer}"
        return [int(x) for x in answer[1:]]


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    w = Writer(tmp_path / "data")
    try:
        yield w
    finally:
        if w.process.poll() is None:
            w.process.kill()
        w.process.wait(timeout=30)


@pytest.fixture
def exporter(tmp_path: Path, writer: Writer) -> Iterator[int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tieredstore.cli", "metrics", "--data-dir",
         str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}", "--min-interval", "0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert f"127.0.0.1:{port}/metrics" in line, \
            f"the exporter said {line!r}; stderr: {process.stderr.read() if process.stderr else ''}"
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_scrapes_beside_a_live_writer_move_and_never_fence_it(
        writer: Writer, exporter: int, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    started = time.time()
    data = tmp_path / "data"
    first = scrape(exporter)
    offsets = writer.append(50)
    second = scrape(exporter)
    for q in range(QUEUES):
        assert queue(first, "max_offset", q) == offsets[q] - 50 == 40
        assert queue(second, "max_offset", q) == queue(second, "commit_offset", q) == offsets[q]
        assert queue(second, "min_offset", q) == 0
        grew = queue(second, "stored_bytes", q) - queue(first, "stored_bytes", q)
        # 50 records of 100 + 37q bytes each (and their headers), 50 consume-queue units
        assert grew >= 50 * (100 + 37 * q), f"queue {q}: stored bytes grew by {grew}"
        assert queue(second, "segments", q) >= queue(first, "segments", q) >= 2
        oldest = queue(second, "oldest_message_timestamp_seconds", q)
        assert oldest == queue(first, "oldest_message_timestamp_seconds", q)
        assert started - 120 < oldest <= queue(second, "newest_message_timestamp_seconds", q)
    assert second[("tieredstore_queues", ())] == QUEUES
    assert second[("tieredstore_corrupt_queues", ())] == 0
    # Read-only: not one write-class request, and one pass per scrape at a bounded cost.
    assert requests(second, "list", "get") > 0
    assert requests(second, "put", "delete", "delete_many", "copy", "create_multipart",
                    "upload_part", "upload_part_copy", "complete_multipart") == 0
    assert second[("tieredstore_bucket_refreshes_total", ())] == \
        first[("tieredstore_bucket_refreshes_total", ())] + 1
    per_pass = second[("tieredstore_bucket_refresh_requests", ())]
    by_op = {dict(k[1])["op"]: v - first.get(k, 0) for k, v in second.items()
             if k[0] == "tieredstore_store_requests_total"}
    assert 0 < per_pass <= PASS_REQUESTS_MAX, f"one pass made {per_pass} requests: {by_op}"
    assert ("tieredstore_queue_copy_lag_bytes",
            (("broker", "broker-0"), ("queue", "0"), ("topic", "t"))) \
        not in second  # the bucket does not record it: only a writer exports it
    # The writer goes on: appends, flushes and closes without being fenced.
    assert writer.append(5) == [o + 5 for o in offsets]
    assert writer.send("close") == "DONE"
    assert writer.process.wait(timeout=30) == 0
    # Over a bucket that stays as it is, a pass reads heads and open segments only.
    scrape(exporter)
    idle = scrape(exporter)
    assert idle[("tieredstore_bucket_refresh_requests", ())] <= IDLE_PASS_REQUESTS_MAX
    for q in range(QUEUES):
        assert queue(idle, "max_offset", q) == offsets[q] + 5
    # Without --listen: one pass, printed; the values a scrape serves.
    capsys.readouterr()
    assert main(["metrics", "--data-dir", str(data), "--json"]) == 0
    once = json.loads(capsys.readouterr().out)
    assert [(q["broker"], q["topic"], q["queue"]) for q in once["queues"]] == [
        ("broker-0", "t", q) for q in range(QUEUES)]
    for q in once["queues"]:
        served = {name: queue(idle, name, q["queue"]) for name in q if name not in (
            "broker", "topic", "queue")}
        assert served == {name: v for name, v in q.items()
                          if name not in ("broker", "topic", "queue")}
        assert len(served) == 8, sorted(served)
