"""verify names segments that no queue metadata references (lost heads)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tieredstore.cli import main
from tieredstore.objectstore import LocalObjectStore

SMALL = """
[segments]
chunk_size = "4KiB"
commit_log_max_size = "32KiB"
consume_queue_max_size = "1KiB"
"""


def three_queues_one_headless_one_damaged(tmp_path: Path, config_text: str) -> list[str]:
    """orders/0..2 with 100 messages each, then queue 1's heads deleted and each
    of queue 2's changed; the command line's common options."""
    config = tmp_path / "small.toml"
    config.write_text(config_text)
    common = ["--config", str(config), "--data-dir", str(tmp_path / "data")]
    for queue in ("0", "1", "2"):
        assert main(["produce", "--topic", "orders", "--queue", queue, "--count", "100",
                     "-q", *common]) == 0

    async def damage() -> None:
        store = LocalObjectStore(tmp_path / "data", fsync=False)
        heads = [o.key for o in await store.list_all("") if "/head-" in o.key]
        await store.delete_many([k for k in heads if "/orders/1/" in k])
        for key in (k for k in heads if "/orders/2/" in k):
            data = bytearray(await store.get(key))
            data[-1] ^= 0xFF
            await store.put(key, bytes(data))
        await store.close()

    asyncio.run(damage())
    return common


def test_verify_reports_a_queue_whose_heads_are_gone(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    config = tmp_path / "small.toml"
    config.write_text(SMALL)
    common = ["--config", str(config), "--data-dir", str(tmp_path / "data")]
    for queue in ("0", "1"):
        assert main(["produce", "--topic", "orders", "--queue", queue, "--count", "100",
                     "-q", *common]) == 0
    assert main(["verify", "-q", *common]) == 0

    async def drop_heads() -> None:
        store = LocalObjectStore(tmp_path / "data", fsync=False)
        heads = [o.key for o in await store.list_all("")
                 if "/orders/1/" in o.key and "/head-" in o.key]
        assert heads
        await store.delete_many(heads)
        await store.close()

    asyncio.run(drop_heads())
    capsys.readouterr()
    assert main(["verify", "-q", *common]) == 1
    out = capsys.readouterr()
    assert "orders/1" in out.err and "no queue metadata references them" in out.err
    assert "queues 2" in out.out  # the queue is counted, not "queues 0"
    # a producer that goes on rebuilds the queue and continues its offsets
    assert main(["produce", "--topic", "orders", "--queue", "1", "--count", "5", *common]) == 0
    assert "offsets [100, 105)" in capsys.readouterr().out
    assert main(["verify", "-q", *common]) == 0


def test_repair_rebuilds_queues_whose_heads_are_gone_or_damaged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = three_queues_one_headless_one_damaged(tmp_path, SMALL)
    capsys.readouterr()
    assert main(["repair", *common]) == 0
    out = capsys.readouterr().out
    assert "rebuilt 2 of 2 queue(s)" in out
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("orders")}
    assert set(rows) == {"1", "2"}
    assert "no head" in rows["1"] and "every head damaged" in rows["2"]
    assert all(" 100 " in row and row.endswith("rebuilt") for row in rows.values())
    assert main(["verify", "-q", *common]) == 0
    capsys.readouterr()
    assert main(["repair", *common]) == 0
    assert "nothing to repair" in capsys.readouterr().out


def test_verify_repair_and_inspect_see_a_queue_whose_bytes_are_only_in_log_objects(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Write mode log, flushed, not compacted, heads lost: an open recovers the
    queue from the log objects, and so do the commands (and a keyed queue opened
    twice takes keyed appends again after the repair)."""
    config = tmp_path / "small.toml"
    config.write_text(SMALL + 'index_max_size = "1KiB"\n')
    common = ["--config", str(config), "--data-dir", str(tmp_path / "data")]
    for _ in range(2):  # two opens: the second fences every segment of the queue
        assert main(["produce", "--topic", "orders", "--queue", "1", "--count", "5",
                     "--key", "k", "-q", *common]) == 0

    async def drop_heads() -> None:
        store = LocalObjectStore(tmp_path / "data", fsync=False)
        listed = await store.list_all("")
        assert not [o.key for o in listed if "/orders/1/" in o.key and o.size
                    and "/meta/" not in o.key], "bytes in chunks: not the case under test"
        await store.delete_many([o.key for o in listed if "/head-" in o.key])
        await store.close()

    asyncio.run(drop_heads())
    capsys.readouterr()
    assert main(["inspect", "queues", "--json", *common]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["topic"], row["queue"], row["max_offset"]) == ("orders", 1, 10)
    assert main(["verify", "-q", *common]) == 1
    out = capsys.readouterr()
    assert "queues 1" in out.out
    assert "orders/1" in out.err and "no queue metadata references them" in out.err
    assert main(["repair", *common]) == 0
    assert "rebuilt 1 of 1 queue(s)" in capsys.readouterr().out
    assert main(["produce", "--topic", "orders", "--queue", "1", "--count", "5", "--key", "k",
                 *common]) == 0
    assert "offsets [10, 15)" in capsys.readouterr().out
    assert main(["query", "--topic", "orders", "--key", "k", "--count", "100", *common]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 15
    assert main(["verify", "-q", *common]) == 0
    assert "messages 15" in capsys.readouterr().out


def test_inspect_lists_a_queue_whose_heads_are_lost_or_damaged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Direct mode, so no log object holds the queues' bytes: a queue with no head
    and one with every head damaged are listed, with why, as verify and repair
    see them, and the others as before."""
    common = three_queues_one_headless_one_damaged(
        tmp_path, SMALL + '[store]\nwrite_mode = "direct"\n')
    capsys.readouterr()
    assert main(["inspect", "queues", "--json", *common]) == 0
    rows = {row["queue"]: row for row in json.loads(capsys.readouterr().out)}
    assert {q: row["lost"] for q, row in rows.items()} == {
        0: None, 1: "no head", 2: "every head damaged"}
    assert rows[0]["max_offset"] == 100 and rows[1]["max_offset"] is None
    assert main(["inspect", *common]) == 0
    out = capsys.readouterr().out
    assert "orders/1: metadata lost (no head)" in out, out
    assert "orders/2: metadata lost (every head damaged)" in out, out
    assert main(["inspect", "topics", "--json", *common]) == 0
    [topic] = json.loads(capsys.readouterr().out)
    assert (topic["queues"], topic["messages"]) == (3, 100)
    assert main(["inspect", "segments", "--json", *common]) == 0
    segments = json.loads(capsys.readouterr().out)
    for queue in (1, 2):  # listed, none recorded: the metadata that records them is lost
        mine = [row for row in segments if row["queue"] == queue]
        assert len(mine) == len([row for row in segments if row["queue"] == 0]), segments
        assert not any(row["recorded"] for row in mine), mine
    assert main(["repair", *common]) == 0
    capsys.readouterr()
    assert main(["inspect", "queues", "--json", *common]) == 0
    rows = {row["queue"]: row for row in json.loads(capsys.readouterr().out)}
    assert {q: (row["lost"], row["max_offset"]) for q, row in rows.items()} == {
        0: (None, 100), 1: (None, 100), 2: (None, 100)}
