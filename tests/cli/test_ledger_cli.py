"""``tieredstore ledger``: list and read without taking over; offload, sweep and
delete as the managed ledger's new owner; keys from the configuration."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tieredstore.cli import main
from tieredstore.config import load_config
from tieredstore.ledger import LedgerHost, OffloadRefused, SegmentLedgerOffloader
from tieredstore.objectstore import LocalObjectStore, ObjectInfo

NAME = "tenant/ns/persistent/orders"


def payload(ledger: int, entry: int) -> bytes:
    return f"ledger {ledger} entry {entry}".encode()


async def build(data: Path) -> None:
    """Three closed ledgers of 5 entries each, and an empty current one; nothing
    offloaded."""
    config = load_config(env={}, backend="local", local_path=str(data), local_fsync=False,
                         ledger_max_entries=5)
    host = LedgerHost.create(config, LocalObjectStore(data, fsync=False))
    ml = await host.open(NAME)
    for ledger in range(3):
        await ml.add_entries([payload(ledger, i) for i in range(5)])
    await ml.rollover()  # ledger 2 closed too, 3 current
    await ml.close()
    await host.close()
    await host.store.close()


def run(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> str:
    code = main(["--data-dir", str(data), "ledger", *args, "--name", NAME])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def rows(text: str) -> dict[int, list[str]]:
    return {int(line.split()[0]): line.split() for line in text.splitlines()
            if line.split() and line.split()[0].isdigit()}


def test_list_offload_read_sweep_and_delete(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    asyncio.run(build(data))
    listed = rows(run(capsys, data, "list"))
    size = sum(len(payload(0, i)) for i in range(5))
    assert [listed[i][1:5] for i in range(3)] == [["closed", "5", str(size), "no"]] * 3
    assert listed[3][1] == "open"  # the one the builder's close left current

    assert "offloaded 3 ledger(s): 0, 1, 2" in run(capsys, data, "offload")
    listed = rows(run(capsys, data, "list"))
    assert [listed[i][4:6] for i in range(3)] == [["yes", "yes"]] * 3

    read = run(capsys, data, "read", "--ledger", "1", "--first", "2")
    assert read.splitlines() == [f"1:{i}\t{len(payload(1, i))}\t{payload(1, i).decode()}"
                                 for i in range(2, 5)]

    monkeypatch.setenv("TIEREDSTORE_LEDGER_DELETION_LAG", "0")
    before = run(capsys, data, "list")
    dry = run(capsys, data, "sweep", "--dry-run")
    assert "dry run: 0 item(s) would be deleted" in dry and "left alone" in dry
    assert run(capsys, data, "list") == before, "a dry run took the managed ledger over"
    swept = run(capsys, data, "sweep")
    assert "local copies deleted, of ledgers: 0, 1, 2" in swept
    listed = rows(run(capsys, data, "list"))
    assert [listed[i][5] for i in range(3)] == ["no"] * 3
    # Read back from the offloads alone.
    assert payload(0, 4).decode() in run(capsys, data, "read", "--ledger", "0")

    assert "the first ledger is now 2" in run(capsys, data, "delete", "--before", "2")
    left = rows(run(capsys, data, "list"))
    assert min(left) == 2 and left[2][1:5] == ["closed", "5", str(size), "yes"]


def test_an_unknown_managed_ledger_is_an_error_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    asyncio.run(build(data))
    before = {o.key for o in asyncio.run(listing(data, ""))}
    for action in (["list"], ["status"], ["offload"], ["sweep"], ["sweep", "--dry-run"],
                   ["delete", "--before", "5"]):
        code = main(["--data-dir", str(data), "ledger", *action, "--name", "no/such"])
        assert code == 2, action
        assert "no/such" in capsys.readouterr().err, action
    # A misspelt name takes nothing over and creates no managed ledger.
    assert {o.key for o in asyncio.run(listing(data, ""))} == before


async def listing(data: Path, prefix: str) -> list[ObjectInfo]:
    async with LocalObjectStore(data, fsync=False) as store:
        return await store.list_all(prefix)


def run_json(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> Any:
    return json.loads(run(capsys, data, *args, "--json"))


def test_status_and_offload_before_a_position(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    asyncio.run(build(data))
    status = run_json(capsys, data, "status")
    assert status["name"] == NAME
    assert [(r["ledger_id"], r["state"], r["offload"]) for r in status["ledgers"]] == [
        (0, "closed", "none"), (1, "closed", "none"), (2, "closed", "none"), (3, "open", "none")]

    done = run_json(capsys, data, "offload", "--before", "2:0")
    assert done == {"name": NAME, "offloaded": [0, 1], "first_not_offloaded": "2:0",
                    "ledger_dir": str(data / "ledgers")}
    text = run(capsys, data, "status")
    assert rows(text)[0][4] == "complete" and rows(text)[2][4] == "none", text
    status = run_json(capsys, data, "status")
    assert [r["offload"] for r in status["ledgers"]] == ["complete", "complete", "none"]
    assert all(r["offload_uuid"] for r in status["ledgers"][:2])
    # The take-over closed ledger 3, which was empty: dropped, no new one opened.
    assert [r["ledger_id"] for r in status["ledgers"]] == [0, 1, 2]

    # Offloaded objects at PIP-17's names: {uuid}-ledger-{id} and its index.
    keys = {o.key for o in asyncio.run(listing(data, "offload/"))}
    assert keys == {f"offload/{r['offload_uuid']}-ledger-{r['ledger_id']}{suffix}"
                    for r in status["ledgers"][:2] for suffix in ("", "-index")}, keys

    assert run_json(capsys, data, "offload")["offloaded"] == [2]  # the rest
    read = run_json(capsys, data, "read", "--ledger", "1", "--first", "4")
    assert [(e["entry_id"], base64.b64decode(e["payload_base64"])) for e in read["entries"]] \
        == [(4, payload(1, 4))]


def test_take_over_commands_add_no_ledger(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Offload, sweep and delete run again and again: no new ledger each time
    (3 -> 4 -> 5 -> 6 was the bug); list and status never take over."""
    data = tmp_path / "data"
    asyncio.run(build(data))
    for _ in range(3):
        run(capsys, data, "offload")
        run(capsys, data, "sweep")
        run(capsys, data, "status")
    ids = [r["ledger_id"] for r in run_json(capsys, data, "list")["ledgers"]]
    assert ids == [0, 1, 2]
    assert sorted(p.name for p in (data / "ledgers").iterdir()) == [
        f"{i:020d}.{ext}" for i in range(3) for ext in ("log", "meta")] + [
        f"{4:020d}.next"]  # the dropped ledger 3's id is never given again
    # The next real owner starts its ledger after them and appends.
    async def append() -> None:
        config = load_config(env={}, backend="local", local_path=str(data), local_fsync=False)
        host = LedgerHost.create(config, LocalObjectStore(data, fsync=False))
        ml = await host.open(NAME)
        assert ml.current_ledger_id == 4  # ids are not reused: 3 was dropped
        await ml.add_entry(b"more")
        await ml.close()
        await host.close()
        await host.store.close()
    asyncio.run(append())
    assert [r["state"] for r in run_json(capsys, data, "list")["ledgers"]][-1] == "open"


def test_a_failed_offload_shows_in_status(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    asyncio.run(build(data))

    async def refuse(*args: Any, **kwargs: Any) -> None:
        raise OffloadRefused("the bucket said no", ledger_id=0)

    monkeypatch.setattr(SegmentLedgerOffloader, "offload", refuse)
    code = main(["--data-dir", str(data), "ledger", "offload", "--before", "1:0",
                 "--name", NAME])
    assert code == 2 and "the bucket said no" in capsys.readouterr().err
    (first, *_) = run_json(capsys, data, "status")["ledgers"]
    assert first["offload"] == "failed" and "the bucket said no" in first["failure"]
    monkeypatch.undo()
    assert run_json(capsys, data, "offload", "--before", "1:0")["offloaded"] == [0]
    (first, *_) = run_json(capsys, data, "status")["ledgers"]
    assert (first["offload"], first["failure"]) == ("complete", None)


@pytest.mark.parametrize("bad", ["x", "1:y", "-1:0"])
def test_a_bad_position_is_refused_naming_it(tmp_path: Path, bad: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    asyncio.run(build(data))
    with pytest.raises(SystemExit) as exit_:
        main(["--data-dir", str(data), "ledger", "offload", f"--before={bad}", "--name", NAME])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--before" in err and repr(bad) in err


def test_flags_feed_the_managed_ledger_config(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``--deletion-lag`` (and the threshold and retention flags, same path:
    configuration keys) reach ManagedLedgerConfig: a zero lag lets sweep
    delete the local copies at once."""
    data = tmp_path / "data"
    asyncio.run(build(data))
    run(capsys, data, "offload")
    kept = run_json(capsys, data, "sweep")
    assert kept["local_copies_deleted"] == []  # the default lag is 4 hours
    swept = run_json(capsys, data, "sweep", "--deletion-lag", "0")
    assert swept["local_copies_deleted"] == [0, 1, 2]
    assert [r["local"] for r in run_json(capsys, data, "list")["ledgers"]] == [False] * 3


def test_append_creates_then_offload_and_read(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk-through of docs/pulsar.md: append to a new managed ledger (from flags,
    then from stdin), offload before a position, status, read back."""
    data = tmp_path / "data"
    got = run_json(capsys, data, "append", "--entry", "hello", "--entry", "world")
    assert got == {"name": NAME, "positions": ["0:0", "0:1"],
                   "ledger_dir": str(data / "ledgers")}
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\nc\n"))
    assert run_json(capsys, data, "append", "--rollover")["positions"] == ["1:0", "1:1", "1:2"]
    assert run_json(capsys, data, "offload", "--before", "1:0")["offloaded"] == [0]
    status = run_json(capsys, data, "status")["ledgers"]
    assert [(r["ledger_id"], r["entries"], r["offload"]) for r in status] == [
        (0, 2, "complete"), (1, 3, "none")]
    assert "0:1\t5\tworld" in run(capsys, data, "read", "--ledger", "0")


def test_offload_without_a_position_follows_the_threshold_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--offload-threshold-bytes`` is the key ``offload_threshold_bytes``: the
    oldest ledgers go once the newer ones hold more than it; ``0`` is all."""
    data = tmp_path / "data"
    asyncio.run(build(data))
    size = sum(len(payload(0, i)) for i in range(5))
    done = run_json(capsys, data, "offload", "--offload-threshold-bytes", str(size + 1))
    assert done["offloaded"] == [0, 1] and done["first_not_offloaded"] == "2:0"
    assert run_json(capsys, data, "offload", "--offload-threshold-bytes", "0")["offloaded"] \
        == [2]


def test_sweep_reports_its_garbage_as_gc_does(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``ledger sweep --json``'s ``offload_garbage`` is the document ``gc --json``
    prints for a pass (one shape for one report, ``by_kind`` too), and text is
    written as every other command's ``--json`` writes it (UTF-8, not escapes)."""
    data = tmp_path / "data"
    asyncio.run(build(data))
    shape = {"dry_run", "deleted", "found", "by_kind"}
    for dry in ([], ["--dry-run"]):
        swept = run_json(capsys, data, "sweep", *dry)
        assert set(swept["offload_garbage"]) == shape, swept
        assert swept["offload_garbage"]["by_kind"] == {}
    name = "tenant/ns/persistent/zürich"
    code = main(["--data-dir", str(data), "ledger", "append", "--name", name, "--entry", "x",
                 "--json"])
    assert code == 0
    assert f'"name": "{name}"' in capsys.readouterr().out
