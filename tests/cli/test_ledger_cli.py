"""``tieredstore ledger``: list and read without taking over; offload, sweep and
delete as the managed ledger's new owner; keys from the configuration."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tieredstore.cli import main
from tieredstore.config import load_config
from tieredstore.ledger import LedgerHost
from tieredstore.objectstore import LocalObjectStore

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
    assert "local copies deleted: 0, 1, 2" in swept
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
    code = main(["--data-dir", str(data), "ledger", "list", "--name", "no/such"])
    assert code == 2
    assert "no/such" in capsys.readouterr().err
