"""The ``tieredstore`` command, run in-process on a local directory store (and
``demo`` once as a real subprocess)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tieredstore.cli import bench as bench_cmd
from tieredstore.cli import main
from tieredstore.cli.common import progress
from tieredstore.config import REFERENCE_FILE, load_config
from tieredstore.objectstore import LocalObjectStore
from tieredstore.segment import FileType, SegmentPath

SMALL = """\
[segments]
chunk_size = "1KiB"
commit_log_max_size = "8KiB"
consume_queue_max_size = "1KiB"
[pool]
group_commit_interval = 0.01
[backend]
local_fsync = false
[store]
# Tests produce at fixed times such as --timestamp 1000 (1970).
timestamp_before_max = inf
"""


class Cli:
    """Runs ``main`` with a small-segment config and a data directory under tmp_path."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.data = tmp_path / "data"
        self.config = tmp_path / "small.toml"
        self.config.write_text(SMALL)

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*args, "--config", str(self.config), "--data-dir", str(self.data)])
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def ok(self, *args: str) -> str:
        code, out, err = self(*args)
        assert code == 0, f"tieredstore {' '.join(args)} exited {code}:\n{out}\n{err}"
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def segment_path(self, topic: str, queue_id: int, file_type: FileType, base: int
                     ) -> SegmentPath:
        config = load_config(self.config, env={})
        return SegmentPath(config.cluster, config.broker, topic, queue_id, file_type, base,
                           prefix=config.key_prefix)


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in list(os.environ):
        if name.startswith("TIEREDSTORE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no conf/tieredstore.toml here: only --config counts
    return Cli(tmp_path, capsys)


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def consume_json(cli: Cli, *args: str) -> list[dict[str, Any]]:
    out = cli.ok("consume", *args, "--json")
    return [json.loads(line) for line in out.splitlines()]


def flip_byte(data_dir: Path, key: str, at: int) -> None:
    """Overwrite an object with one byte changed, its metadata (stored CRC) kept."""

    async def go() -> None:
        store = LocalObjectStore(data_dir, fsync=False)
        got = await store.get_object(key)
        data = bytearray(got.data)
        data[at] ^= 0xFF
        await store.put(key, bytes(data), metadata=dict(got.info.metadata))

    asyncio.run(go())


# --- demo ---------------------------------------------------------------------------


def test_demo_produces_restarts_consumes_and_verifies(cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli("demo", "--messages", "1500")
    assert code == 0, out + err
    assert "demo: OK" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("demo-")]
    assert len(rows) == 6 and all(r[-1] == "ok" for r in rows)
    assert sum(int(r[-2]) for r in rows) == 1500  # every message checked
    # a queue's active commit log, consume queue and key index, and sealed segments
    assert any(int(r[4]) > 3 for r in rows), "no segment sealed"
    assert "0 differences" in out and "0 errors" in out
    verify = re.search(r"verify \(read-only\)\s+\d+ \(([^)]*)\)", out)
    assert verify is not None, out
    ops = {part.split()[0] for part in verify.group(1).split(", ")}
    assert ops <= {"get", "head", "list"}, f"verify wrote to the store: {verify.group(0)}"


def test_make_demo_runs_the_console_script_with_no_arguments(tmp_path: Path) -> None:
    """As ``make demo`` runs it, in a directory holding conf/tieredstore.toml (here
    the shipped reference file), which the CLI reads when no --config is given."""
    (tmp_path / "conf").mkdir()
    shutil.copy(REFERENCE_FILE, tmp_path / "conf")
    script = Path(sys.executable).with_name("tieredstore")
    command = [str(script), "demo"] if script.exists() else \
        [sys.executable, "-m", "tieredstore.cli", "demo"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIEREDSTORE_")}
    for _ in range(2):  # and again: `make demo` twice in a row clears its own demo-data
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "demo: OK" in done.stdout
        assert (tmp_path / "demo-data" / "objects").is_dir()


def test_demo_refuses_a_directory_it_did_not_create(cli: Cli) -> None:
    cli.data.mkdir()
    notes = cli.data / "notes.txt"
    notes.write_text("mine")
    code, out, err = cli("demo", "--messages", "50")
    assert notes.exists() and notes.read_text() == "mine", "the demo deleted a user's file"
    assert sorted(cli.data.iterdir()) == [notes]  # nothing written either
    assert code == 2 and str(cli.data) in err and "not a demo directory" in err, out + err


def test_demo_runs_again_in_its_own_directory_and_in_an_empty_one(cli: Cli) -> None:
    cli.data.mkdir()  # empty: the demo takes it
    assert "demo: OK" in cli.ok("demo", "--messages", "50")
    assert "demo: OK" in cli.ok("demo", "--messages", "50")  # its own: cleared, run again
    code, out, err = cli("verify")
    assert code == 0 and "messages 50," in out, out + err  # only the last run's messages


def test_demo_of_fewer_messages_than_queues_leaves_the_others_out(cli: Cli) -> None:
    out = cli.ok("demo", "--messages", "3")  # 6 queues: at least three get nothing
    assert "demo: OK" in out and "consumed 3 messages" in out


# --- produce and consume ----------------------------------------------------------------


def test_produce_then_consume_round_trip(cli: Cli, tmp_path: Path) -> None:
    out = cli.ok("produce", "--topic", "orders", "--queue", "3", "--count", "300", "--size",
                 "50", "--key", "k1", "--key", "k2", "--tag", "red", "--property", "a=1",
                 "--property", "b=x=y")
    assert "produced 300 messages" in out and "offsets [0, 300)" in out
    lines = tmp_path / "lines.txt"
    lines.write_bytes("first\nzürich ünïcode\n\n".encode() + b"\xff\xfe binary\r\nlast")
    assert "offsets [300, 305)" in cli.ok("produce", "--topic", "orders", "--queue", "3",
                                        "--file", str(lines))

    got = consume_json(cli, "--topic", "orders", "--queue", "3")
    assert [m["offset"] for m in got] == list(range(305))
    generated = [m for m in got if m["offset"] < 300]
    assert all(len(m["body"]) == 50 and m["body"].startswith(f"message {m['offset']} ")
               for m in generated)
    assert {(tuple(m["keys"]), m["tags"], json.dumps(m["properties"])) for m in generated} \
        == {(("k1", "k2"), "red", json.dumps({"a": "1", "b": "x=y"}))}
    tail = got[300:]
    assert [m["encoding"] for m in tail] == ["utf-8", "utf-8", "utf-8", "base64", "utf-8"]
    assert [m["body"] for m in tail[:3]] + [tail[4]["body"]] == \
        ["first", "zürich ünïcode", "", "last"]
    assert base64.b64decode(tail[3]["body"]) == b"\xff\xfe binary"
    assert {(m["topic"], m["queue"]) for m in got} == {("orders", 3)}

    window = consume_json(cli, "--topic", "orders", "--queue", "3", "--from", "295",
                          "--count", "7")
    assert [m["offset"] for m in window] == list(range(295, 302))
    text = cli.ok("consume", "--topic", "orders", "--queue", "3", "--from", "300",
                  "--count", "1")
    assert re.fullmatch(r"300\t\d{4}-\d\d-\d\dT[\d:.]+Z\tfirst\n", text)


def test_consume_text_tells_a_backslash_from_a_byte_that_is_not_utf8(cli: Cli,
                                                                      tmp_path: Path) -> None:
    """Text output escapes a backslash as \\\\ and shows a byte that is not UTF-8 as
    \\xNN: the four characters \\xff and the byte 0xff print differently."""
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"\\xff\n\xff\na\tb\\n\n")
    cli.ok("produce", "--topic", "esc", "--queue", "0", "--file", str(lines))
    text = cli.ok("consume", "--topic", "esc", "--queue", "0")
    assert [line.split("\t", 2)[2] for line in text.splitlines()] == \
        ["\\\\xff", "\\xff", "a\\tb\\\\n"]


def test_consume_from_a_time(cli: Cli) -> None:
    for stamp in ("1000", "2000", "3000"):
        cli.ok("produce", "--topic", "t", "--queue", "0", "--count", "40", "--timestamp",
               stamp)
    assert [m["offset"] for m in consume_json(cli, "--topic", "t", "--queue", "0",
                                              "--from-time", "1500", "--count", "2")] == [40, 41]
    iso = consume_json(cli, "--topic", "t", "--queue", "0", "--from-time",
                       "1970-01-01T00:00:03Z")
    assert [m["offset"] for m in iso] == list(range(80, 120))
    assert consume_json(cli, "--topic", "t", "--queue", "0", "--from-time", "9999") == []


# --- inspect --------------------------------------------------------------------------------


def test_inspect_shows_segments_and_writes_nothing(cli: Cli) -> None:
    for queue, count in (("0", "250"), ("1", "20")):
        cli.ok("produce", "--topic", "orders", "--queue", queue, "--count", count)
    cli.ok("produce", "--topic", "orders", "--queue", "1", "--count", "5", "--key", "k")
    before = tree(cli.data)

    queues = cli.json("inspect", "queues")
    assert [(q["queue"], q["min_offset"], q["max_offset"]) for q in queues] == \
        [(0, 0, 250), (1, 0, 25)]
    assert queues[0]["commitlog_segments"] > 1 and queues[0]["writer"]
    # The key index: none for queue 0 (no keys), five 32-byte entries for queue 1.
    assert [(q["index_segments"], q["index_bytes"]) for q in queues] == [(0, 0), (1, 5 * 32)]
    lines = cli.ok("inspect", "queues").splitlines()
    at = lines[0].index("key index")
    assert lines[-1].startswith("broker broker-0: closed writer")
    assert [line[at : at + len("key index")].strip() for line in lines[2:-1]] == ["-", "160 B"]
    assert cli.json("inspect", "topics") == [
        {"broker": "broker-0", "topic": "orders", "queues": 2, "messages": 275,
         "commitlog_bytes": queues[0]["commitlog_bytes"] + queues[1]["commitlog_bytes"],
         "consumequeue_bytes": queues[0]["consumequeue_bytes"]
         + queues[1]["consumequeue_bytes"], "index_bytes": 5 * 32}]
    segments = cli.json("inspect", "segments", "--topic", "orders", "--queue", "0")
    commit_log = [s for s in segments if s["type"] == "commitlog"]
    assert [s["base"] for s in commit_log] == sorted(s["base"] for s in commit_log)
    assert all(s["sealed"] and s["merged"] and s["recorded"] for s in commit_log[:-1])
    assert commit_log[-1]["state"] == "open" and not commit_log[-1]["recorded"]
    assert all(b["base"] == a["base"] + a["size"] for a, b in itertools.pairwise(commit_log))
    assert commit_log[1]["first_offset"] == commit_log[0]["end_offset"]
    chunks = cli.json("inspect", "chunks", "--topic", "orders", "--queue", "0", "--type",
                      "commitlog", "--segment", str(commit_log[-1]["base"]))
    assert chunks and all(re.fullmatch(r"[0-9a-f]{8}", c["crc32c"]) for c in chunks)
    assert sum(c["length"] for c in chunks) == commit_log[-1]["size"]
    for what, column in (("topics", "messages"), ("queues", "writer"),
                         ("segments", "merged"), ("chunks", "crc32c")):
        assert column in cli.ok("inspect", what).splitlines()[0].split()
    cli.ok("verify")
    assert tree(cli.data) == before, "inspect or verify changed the store"


# --- verify ---------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["merged segment", "chunk of the open segment"])
def test_verify_names_the_queue_and_offset_of_a_corrupted_object(cli: Cli, target: str
                                                                 ) -> None:
    cli.ok("produce", "--topic", "orders", "--queue", "0", "--count", "200")
    cli.ok("produce", "--topic", "other", "--queue", "0", "--count", "50")
    assert "errors 0" in cli.ok("verify")
    segments = [s for s in cli.json("inspect", "segments", "--topic", "orders", "--type",
                                    "commitlog")]
    if target == "merged segment":
        victim = segments[1]
        assert victim["merged"]
        key = cli.segment_path("orders", 0, FileType.COMMIT_LOG, victim["base"]).merged_key
        first = victim["first_offset"]
    else:
        victim = segments[-1]
        assert victim["state"] == "open" and victim["size"] > 20
        key = cli.segment_path("orders", 0, FileType.COMMIT_LOG, victim["base"]).chunk_key(0)
        first = segments[-2]["end_offset"]
    flip_byte(cli.data, key, 20)

    code, out, err = cli("verify")
    assert code == 1
    assert re.search(r"^broker-0\s+orders\s+0 .*ERRORS$", out, re.M), out
    assert re.search(r"^broker-0\s+other\s+0 .* ok$", out, re.M), out
    assert re.search(rf"broker-0 orders/0: (offset {first}|offsets \[{first}, \d+\)):.*CRC32C",
                     err), err
    assert key in err


def test_verify_finds_no_gap_in_a_key_index_that_skips_offsets_without_keys(cli: Cli
                                                                           ) -> None:
    """Key-index segments hold entries of keyed messages only: the next one may
    start offsets after the last one ends (and one message's entries may
    straddle two), which is no gap in the metadata."""
    cli.config.write_text(SMALL.replace("[segments]\n", '[segments]\nindex_max_size = "1KiB"\n'))
    for count, keys in (("32", ("--key", "k")), ("10", ()), ("40", ("--key", "k")),
                        ("40", ("--key", "a", "--key", "b"))):
        cli.ok("produce", "--topic", "t", "--queue", "0", "--count", count, *keys)
    index = cli.json("inspect", "segments", "--topic", "t", "--type", "index")
    assert [s["first_offset"] for s in index[:2]] == [0, 42], index  # offsets 32..41: no key
    out = cli.ok("verify")
    assert "errors 0" in out and "messages 122" in out, out


# --- recover --------------------------------------------------------------------------------


def test_recover_reports_a_corrupt_queue_and_exits_1(cli: Cli) -> None:
    for queue in ("0", "1"):
        cli.ok("produce", "--topic", "orders", "--queue", queue, "--count", "120")
    out = cli.ok("recover")
    assert "recovered 2 of 2 queues" in out and "0 corrupt" in out
    # A second writer's session: the active segment then holds two data chunks at
    # least (in the log mode, full chunks of log pieces).
    cli.ok("produce", "--topic", "orders", "--queue", "1", "--count", "40")
    segments = cli.json("inspect", "segments", "--topic", "orders", "--queue", "1", "--type",
                        "commitlog")
    active = max(s["base"] + s["size"] if s["sealed"] else s["base"] for s in segments)
    path = cli.segment_path("orders", 1, FileType.COMMIT_LOG, active)

    store = LocalObjectStore(cli.data, fsync=False)
    asyncio.run(store.put(path.base_dir + "stray", b"?"))
    assert "0 corrupt" in cli.ok("recover")  # a foreign object alone: read around
    code, _, err = cli("verify")
    assert code == 1 and "foreign object" in err and "stray" in err
    chunks = [o.key for o in asyncio.run(store.list_all(path.base_dir))
              if "/chunk-" in o.key and o.size]
    assert len(chunks) >= 2
    asyncio.run(store.delete(chunks[0]))  # a hole in the active segment: read around
    code, out, err = cli("recover")
    assert code == 1, out + err
    assert re.search(r"^orders\s+0 .* ok$", out, re.M), out
    assert re.search(r"^orders\s+1 .* DAMAGED$", out, re.M), out
    assert "DAMAGED orders/1:" in out and "are missing" in out
    code, report, _ = cli("recover", "--json")
    assert code == 1
    states = {q["queue"]: q["state"] for q in json.loads(report)["queues"]}
    assert states == {0: "ok", 1: "damaged"}


# --- errors, bench, progress ---------------------------------------------------------------


def test_errors_print_one_line_and_exit_2(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("produce", "--topic", "t", "--queue", "0", "--count", "3")
    code, _, err = cli("consume", "--topic", "nope", "--queue", "0")
    assert (code, err) == (2, "tieredstore: unknown topic 'nope'; topics: t\n")
    code, _, err = cli("consume", "--topic", "t", "--queue", "5")
    assert (code, err) == (2, "tieredstore: unknown queue t/5; topic 't' has queues 0\n")
    code, _, err = cli("consume", "--topic", "t", "--queue", "0", "--from", "9")
    assert code == 2 and err.startswith(
        "tieredstore: t/0: offset 9 is outside the queue's offsets [0, 3)")
    code, _, err = cli("produce", "--topic", "t", "--queue", "0", "--file", "/no/such/file")
    assert code == 2 and err.startswith("tieredstore: cannot read '/no/such/file'")
    code, _, err = cli("produce", "--topic", "bad/name", "--queue", "0", "--count", "1")
    assert code == 2 and "invalid topic 'bad/name'" in err
    monkeypatch.setenv("TIEREDSTORE_CHUNK_SIZE", "lots")
    code, _, err = cli("verify")
    assert code == 2 and err.startswith("tieredstore: config 'chunk_size'")
    monkeypatch.delenv("TIEREDSTORE_CHUNK_SIZE")
    assert main(["inspect", "--data-dir", str(cli.data / "missing")]) == 2
    assert not (cli.data / "missing").exists()
    for argv in (["consume", "--topic", "t"], ["produce", "--topic", "t", "--queue", "-1"],
                 ["inspect", "everything"], ["verify", "--bogus"], []):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


def test_bench_runs_the_suite_with_its_arguments(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "__main__.py").write_text("")
    monkeypatch.chdir(tmp_path)  # a checkout: the suite beside the working directory
    ran: list[tuple[list[str], Path]] = []

    def fake_run(command: list[str], *, cwd: Path, check: bool, stdout: Any = None
                 ) -> subprocess.CompletedProcess[bytes]:
        ran.append((command, cwd))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(bench_cmd.subprocess, "run", fake_run)
    assert bench_cmd.find_suite() == tmp_path
    assert main(["bench", "--tiny", "--only", "write"]) == 0
    assert main(["bench", "--", "--help"]) == 0
    assert ran == [([sys.executable, "-m", "bench", "--tiny", "--only", "write"], tmp_path),
                   ([sys.executable, "-m", "bench", "--help"], tmp_path)]

    monkeypatch.setattr(bench_cmd, "find_suite", lambda: None)
    assert main(["bench"]) == 2  # cannot run as asked: no suite here
    assert "bench needs a source checkout" in capsys.readouterr().err


def test_progress_bars_only_when_enabled() -> None:
    assert progress(False, total=3).bar is None
    pytest.importorskip("tqdm")
    with progress(True, total=3, desc="t") as bar:
        assert bar.bar is not None
        bar.update(3)
    assert bar.bar is None


def test_gc_lists_with_dry_run_then_deletes(cli: Cli) -> None:
    cli.ok("produce", "--topic", "orders", "--queue", "0", "--count", "50")
    stale = cli.data / "tmp" / "left-by-a-kill"
    stale.write_bytes(b"half written")
    os.utime(stale, (1_600_000_000, 1_600_000_000))
    out = cli.ok("gc", "--dry-run")
    assert "temporary file" in out and "left-by-a-kill" in out
    assert "dry run: 1 item(s) would be deleted" in out and stale.exists()
    out = cli.ok("gc")
    assert "deleted 1 item(s) (1 temporary file)" in out and not stale.exists()
    # At no safety age: the log fences below the newest log entry, nothing else.
    out = cli.ok("gc", "--safety-age", "0")
    assert out.splitlines()[-1] in ("deleted 0 item(s)", "deleted 1 item(s) (1 log fence)")
    assert "deleted 0 item(s)" in cli.ok("gc", "--safety-age", "0")
    rows = consume_json(cli, "--topic", "orders", "--queue", "0")
    assert len(rows) == 50
