"""``tieredstore produce`` fed by a pipe: each line read becomes durable within the
store's group commit interval while the input is still open, as any appended
message does; a SIGKILL loses none of what was durable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tieredstore.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
INTERVAL = 0.2  # group_commit_interval, through TIEREDSTORE_GROUP_COMMIT_INTERVAL
# chunk_wait 0: a queue's consume-queue units go with each group commit, so that a
# reader in another process sees a message once it is durable (with the default 10 s,
# the units of a burst's last messages may wait that long: docs/embedding.md, chunk_wait).


def consumed(data: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The bodies of topic t, queue 0 a read-only reader of ``data`` sees."""
    capsys.readouterr()
    code = main(["--data-dir", str(data), "consume", "--topic", "t", "--queue", "0", "--json"])
    out = capsys.readouterr()
    if code != 0:  # nothing durable yet: the topic is unknown to a reader
        assert "unknown" in out.err or "no local store" in out.err, out.err
        return []
    return [json.loads(line)["body"] for line in out.out.splitlines()]


def wait_for(data: Path, capsys: pytest.CaptureFixture[str], want: list[str],
             seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    got = consumed(data, capsys)
    while got != want and time.monotonic() < deadline:
        time.sleep(INTERVAL / 2)
        got = consumed(data, capsys)
    return got


def test_piped_lines_are_durable_within_the_commit_interval_while_input_is_open(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TIEREDSTORE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TIEREDSTORE_")},
           "TIEREDSTORE_GROUP_COMMIT_INTERVAL": str(INTERVAL),
           "TIEREDSTORE_CHUNK_WAIT": "0", "TIEREDSTORE_LOCAL_FSYNC": "false",
           "PYTHONPATH": str(ROOT)}
    producer = subprocess.Popen(
        [sys.executable, "-m", "tieredstore.cli", "--data-dir", str(data), "produce",
         "--topic", "t", "--queue", "0"],
        cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    assert producer.stdin is not None
    sent: list[str] = []
    try:
        for batch in range(3):
            for i in range(3):
                line = f"m{batch}-{i}"
                producer.stdin.write(line.encode() + b"\n")
                producer.stdin.flush()
                sent.append(line)
                time.sleep(0.05)
            # the store opens (recovery) before its first commit: allow for that once;
            # after, a bit more than the commit interval (and a reader's own time)
            allowed = 20.0 if batch == 0 else 5 * INTERVAL + 2
            got = wait_for(data, capsys, sent, allowed)
            assert producer.poll() is None, producer.communicate()
            assert got == sent, (f"after {len(sent)} lines piped, a reader saw {got}: "
                                 "stdin blocked the group commit")
    finally:
        producer.send_signal(signal.SIGKILL)
        _, err = producer.communicate(timeout=30)
    assert producer.returncode == -signal.SIGKILL, err
    assert consumed(data, capsys) == sent, "what was durable before the SIGKILL is gone"
