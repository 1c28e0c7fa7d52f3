"""``consume --skip-damaged`` reads around damage and says what it skipped;
``consume --follow`` tails a queue another process appends to, until a signal
(issue 39, defects 9 and 10)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from tests.cli.test_cli import Cli, flip_byte
from tieredstore.segment import FileType

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in list(os.environ):
        if name.startswith("TIEREDSTORE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return Cli(tmp_path, capsys)


def damaged(cli: Cli) -> tuple[int, int]:
    """200 messages, a byte of a merged commit-log segment's data flipped: the
    offsets ``[first, end)`` of that segment (the damage is somewhere in them)."""
    cli.ok("produce", "--topic", "orders", "--queue", "0", "--count", "200")
    segments = cli.json("inspect", "segments", "--topic", "orders", "--type", "commitlog")
    victim = segments[1]
    assert victim["merged"]
    key = cli.segment_path("orders", 0, FileType.COMMIT_LOG, victim["base"]).merged_key
    flip_byte(cli.data, key, 20)
    return victim["first_offset"], victim["end_offset"]


def test_consume_skip_damaged_prints_every_other_message_and_each_skipped_range(
        cli: Cli) -> None:
    first, end = damaged(cli)
    code, out, err = cli("consume", "--topic", "orders", "--queue", "0", "--json")
    assert code == 2 and "CRC32C" in err, "strict by default: the damage stops it"
    assert [json.loads(line)["offset"] for line in out.splitlines()] == list(range(first))

    code, out, err = cli("consume", "--topic", "orders", "--queue", "0", "--json",
                         "--skip-damaged")
    assert code == 1, f"skipped damage is something found: exit 1\n{err}"
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["broker"] for r in rows} == {"broker-0"}  # messages and skipped ranges
    read = [r["offset"] for r in rows if "offset" in r]
    skips = [r["skipped"] for r in rows if "skipped" in r]
    assert skips, "nothing reported skipped"
    lost = [o for s in skips for o in range(s["first_offset"], s["end_offset"])]
    assert sorted(read + lost) == list(range(200)) and not set(read) & set(lost)
    assert first <= min(lost) and max(lost) < end, "only the damaged segment's records"
    assert all(s["count"] == s["end_offset"] - s["first_offset"] and "CRC32C" in s["reason"]
               and "commitlog" in s["segment"] for s in skips), skips
    offsets = [r.get("offset", r.get("skipped", {}).get("first_offset")) for r in rows]
    assert offsets == sorted(offsets), "skipped entries in offset order among the messages"
    for s in skips:
        assert f"skipped offsets [{s['first_offset']}, {s['end_offset']})" in err
    assert f"consumed {len(read)} messages" in err and f"skipped {len(lost)} unreadable" in err

    # The same in text: what cannot be read is on stderr, never silent.
    code, out, err = cli("consume", "--topic", "orders", "--queue", "0", "--skip-damaged")
    assert code == 1 and len(out.splitlines()) == len(read)
    assert err.count("skipped offset") == len(skips)


def test_consume_interval_without_follow_is_refused(cli: Cli) -> None:
    cli.ok("produce", "--topic", "t", "--queue", "0", "--count", "3")
    code, _, err = cli("consume", "--topic", "t", "--queue", "0", "--interval", "0.5")
    assert code == 2 and "--interval needs --follow" in err
    with pytest.raises(SystemExit) as exc:
        cli("consume", "--topic", "t", "--queue", "0", "--follow", "--interval", "0")
    assert exc.value.code == 2
    assert "above 0 seconds" in cli.capsys.readouterr().err


# --- --follow, across processes -------------------------------------------------------

WRITER = """
import sys, time
from tieredstore.config import load_config
from tieredstore.store import MessageStore
config = load_config(sys.argv[1], env={}, local_path=sys.argv[2])
with MessageStore.open(config) as store:
    for i in range(int(sys.argv[3]), int(sys.argv[4])):
        store.append("t", 0, f"m{i}".encode())
        if i % 10 == 9:
            store.flush()
            time.sleep(0.05)
    store.flush()
"""


def tieredstore(cli: Cli, *args: str) -> list[str]:
    return [sys.executable, "-m", "tieredstore.cli", *args, "--config", str(cli.config),
            "--data-dir", str(cli.data)]


def write(cli: Cli, first: int, end: int) -> None:
    subprocess.run([sys.executable, "-c", WRITER, str(cli.config), str(cli.data), str(first),
                    str(end)], cwd=ROOT, check=True, timeout=120)


def read_lines(stream: IO[str], count: int, seconds: float) -> list[dict[str, Any]]:
    """``count`` JSON lines from ``stream`` within ``seconds``."""
    lines: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while len(lines) < count:
        assert time.monotonic() < deadline, f"only {len(lines)} of {count} lines came"
        line = stream.readline()
        assert line, "the follower's output ended"
        lines.append(json.loads(line))
    return lines


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_consume_follow_prints_what_another_process_appends_until_a_signal(
        cli: Cli, sig: signal.Signals) -> None:
    write(cli, 0, 20)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIEREDSTORE_")}
    env["PYTHONPATH"] = str(ROOT)
    follower = subprocess.Popen(
        tieredstore(cli, "consume", "--topic", "t", "--queue", "0", "--from", "5", "--follow",
                    "--interval", "0.1", "--json"),
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert follower.stdout is not None and follower.stderr is not None
        first = read_lines(follower.stdout, 15, 60)
        assert [m["offset"] for m in first] == list(range(5, 20))
        write(cli, 20, 100)  # another process appends and flushes, in batches
        then = read_lines(follower.stdout, 80, 60)
        assert [(m["offset"], m["body"]) for m in then] == [(i, f"m{i}")
                                                            for i in range(20, 100)]
        assert follower.poll() is None, "it follows on at the end"
        follower.send_signal(sig)
        code = follower.wait(timeout=30)
        err = follower.stderr.read()
        assert code == 0, f"exit {code} on {sig.name}: {err}"
        assert "consumed 95 messages of broker-0 t/0, offsets [5, 100)" in err
        assert "Traceback" not in err
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()


def test_consume_follow_stops_after_count(cli: Cli) -> None:
    write(cli, 0, 10)
    code, out, _ = cli("consume", "--topic", "t", "--queue", "0", "--follow", "--count", "4",
                       "--json")
    assert code == 0 and [json.loads(x)["offset"] for x in out.splitlines()] == [0, 1, 2, 3]
