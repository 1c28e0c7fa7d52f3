"""``tieredstore query``: a topic's messages by key, read-only, across its queues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tieredstore.cli import main
from tieredstore.config import load_config
from tieredstore.objectstore import LocalObjectStore
from tieredstore.store import MessageStore

T0 = 1_700_000_000_000


def build(data: Path) -> None:
    config = load_config(env={}, backend="local", local_path=str(data), local_fsync=False,
                         timestamp_before_max=float("inf"), index_max_size=1024)
    with MessageStore.open(config, store=LocalObjectStore(data, fsync=False)) as store:
        for i in range(300):
            store.append("orders", i % 3, b"order %d" % i, keys=[f"customer-{i % 7}"],
                         properties={"UNIQ_KEY": f"id-{i}"}, timestamp=T0 + i)


def query(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> list[str]:
    assert main(["--data-dir", str(data), "query", "--topic", "orders", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_query_finds_a_key_in_every_queue_newest_last(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    data = tmp_path / "data"
    build(data)
    before = sorted(p.name for p in data.rglob("*"))
    lines = query(capsys, data, "--key", "customer-3", "--count", "1000")
    numbers = [i for i in range(300) if i % 7 == 3]
    assert [line.split("\t")[-1] for line in lines] == [f"order {i}" for i in numbers]
    assert [line.split("\t")[:3] for line in lines] == [["broker-0", str(i % 3), str(i // 3)]
                                                        for i in numbers]
    newest = query(capsys, data, "--key", "customer-3", "--count", "2", "--json")
    assert [json.loads(line)["body"] for line in newest] == [f"order {i}" for i in numbers[-2:]]
    window = query(capsys, data, "--key", "customer-3", "--from-time", str(T0 + 100),
                   "--until-time", str(T0 + 120))
    assert [line.split("\t")[-1] for line in window] == [
        f"order {i}" for i in numbers if 100 <= i <= 120]
    assert query(capsys, data, "--key", "id-42")[0].endswith("\torder 42")
    assert query(capsys, data, "--key", "nobody") == []
    assert sorted(p.name for p in data.rglob("*")) == before  # read-only


def test_a_bad_count_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    build(data)
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-dir", str(data), "query", "--topic", "orders", "--key", "k",
              "--count", "0"])
    assert exit_info.value.code == 2
    assert "--count: must be at least 1" in capsys.readouterr().err
