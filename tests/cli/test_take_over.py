"""An operator's command does not end a live broker or managed ledger by accident
(issue 39, defect 3).

Each writer refreshes a liveness record (docs/writers.md, Liveness records).
The commands that take a broker over (``produce``, ``repair``, ``recover``,
``spark compact``) or a managed ledger over (``ledger append|offload|sweep|
delete``) refuse while its writer is live, exit 2 with one line naming it and
when it was last seen, write nothing and fence nobody; ``--take-over`` takes it
over, and the writer replaced is fenced as always. The API has the same choice
(``take_over=False``). ``inspect brokers`` and ``metrics`` show the writer.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tieredstore.cli import main
from tieredstore.config import load_config
from tieredstore.errors import Fenced
from tieredstore.ledger import LedgerHost
from tieredstore.objectstore import LocalObjectStore
from tieredstore.store import AsyncMessageStore, Seen, WriterLive

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_796_000_000_000


def writer_process(data: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.cli.live_writer", str(data),
                             str(seconds)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "OPEN"
    return proc


def keys(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# ``repair`` opens a writer only when a queue's metadata is lost (else it reads
# and exits 0, fencing nobody); when it does, it opens as ``produce`` does.
TAKE_OVER_COMMANDS = [
    ["produce", "--topic", "cli", "--queue", "0", "--count", "3"],
    ["recover"],
    ["spark", "compact"],
    ["spark", "compact", "--log"],
]


def test_commands_refuse_a_live_broker_and_leave_it_writing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    writer = writer_process(data, 8.0)
    try:
        for args in TAKE_OVER_COMMANDS:
            capsys.readouterr()
            code = main([*args, "--data-dir", str(data)])
            err = capsys.readouterr().err.strip()
            assert code == 2, (args, err)
            assert len(err.splitlines()) == 1, err
            assert "broker default-cluster/broker-0 is written by broker-0@" in err, err
            assert "last seen" in err and "--take-over" in err, err
        assert not [k for k in keys(data) if "/cli/" in k]  # produce wrote nothing
        code = main(["inspect", "brokers", "--json", "--data-dir", str(data)])
        (row,) = json.loads(capsys.readouterr().out)
        assert (row["broker"], row["state"], row["pid"]) == ("broker-0", "live", writer.pid)
    finally:
        out, err = writer.communicate(timeout=120)
    # The writer was not fenced by any of them: it ran to its end.
    assert writer.returncode == 0 and "DONE" in out, err[-2000:]
    code = main(["inspect", "brokers", "--json", "--data-dir", str(data)])
    (row,) = json.loads(capsys.readouterr().out)
    assert row["state"] == "closed"
    # A closed writer is no reason to refuse.
    assert main(["produce", "--topic", "cli", "--queue", "0", "--count", "3",
                 "--data-dir", str(data)]) == 0


def test_take_over_fences_the_live_writer(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    writer = writer_process(data, 30.0)
    try:
        assert main(["produce", "--topic", "cli", "--queue", "0", "--count", "3",
                     "--take-over", "--data-dir", str(data)]) == 0
        out, err = writer.communicate(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode != 0 and "DONE" not in out
    assert "a newer store took" in err or "newer" in err, err[-2000:]


async def test_the_api_refuses_a_live_writer_only_when_asked(tmp_path: Path) -> None:
    config = load_config(env={}, local_path=str(tmp_path / "d"), local_fsync=False,
                         gc_interval=0, retention_interval=0, timestamp_before_max=float("inf"))
    first = await AsyncMessageStore.open(config, writer_id="host-a")
    try:
        assert await first.append("t", 0, b"m", timestamp=T0) == 0
        await first.flush()
        before = keys(tmp_path / "d")
        with pytest.raises(WriterLive) as refused:
            await AsyncMessageStore.open(config, take_over=False)
        assert "host-a" in str(refused.value) and "last seen" in str(refused.value)
        assert refused.value.seen.writer == "host-a"
        assert keys(tmp_path / "d") == before  # nothing written
        assert await first.append("t", 0, b"n", timestamp=T0) == 1  # not fenced
        await first.flush()
    finally:
        await first.close()
    second = await AsyncMessageStore.open(config, take_over=False)  # closed: no refusal
    try:
        assert await second.max_offset("t", 0) == 2
    finally:
        await second.close()
    with pytest.raises(TypeError):
        await AsyncMessageStore.open(config, take_over="no")  # type: ignore[arg-type]


def test_a_record_goes_stale_and_refreshes_off_mean_unknown() -> None:
    now = T0 / 1000
    live = Seen("w", "h", 1, T0, T0, 30.0)
    assert live.state(now + 94) == "live"  # three intervals and 5 s
    assert live.state(now + 96) == "stale"
    assert Seen("w", "h", 1, T0, T0, 0.0).state(now) == "unknown"
    assert Seen("w", "h", 1, T0, T0, 30.0, closed=True).state(now) == "closed"
    assert Seen.decode(b"not json") is None
    assert Seen.decode(live.encode()) == live


async def ledger_cli(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tieredstore.cli", "ledger", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, (out + err).decode()


async def test_ledger_commands_refuse_a_live_owner(tmp_path: Path) -> None:
    data, ledgers = tmp_path / "d", tmp_path / "ledgers"
    config = load_config(env={}, local_path=str(data), local_fsync=False)
    store = LocalObjectStore(data, fsync=False)
    host = LedgerHost.create(config, store, str(ledgers))
    owner = await host.open("ml", writer_id="broker-a")
    try:
        await owner.add_entries([b"x"] * 3)
        await owner.rollover()
        where = ["--name", "ml", "--data-dir", str(data), "--ledgers", str(ledgers)]
        for action in (["append", "--entry", "y"], ["offload"], ["sweep"],
                       ["delete", "--before", "1"]):
            code, text = await ledger_cli(*action, *where)
            assert code == 2, (action, text)
            assert "managed ledger 'ml' is written by broker-a" in text, text
            assert "--take-over" in text, text
        code, text = await ledger_cli("status", "--json", *where)
        assert code == 0, text
        shown = json.loads(text)["owner"]
        assert (shown["writer"], shown["state"]) == ("broker-a", "live"), shown
        await owner.add_entries([b"z"])  # not fenced
        code, text = await ledger_cli("offload", *where, "--take-over")
        assert code == 0, text
        with pytest.raises(Fenced):
            await owner.add_entries([b"late"])
    finally:
        started = time.monotonic()
        await owner.close()
        await host.close()
        await store.close()
        assert time.monotonic() - started < 30
