"""One damaged unit costs a bounded number of reads and warnings, not some per record.

Was: a scan read the records of a unit that failed its check one at a time, each
read a checked GET of the whole unit with its reads again, so one corrupt 6 MB
chunk of 6,000 records cost ``verify`` 18,015 GETs (108 GB on S3) and 12,006
warnings, and ``consume`` a flood of them too.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from tieredstore.cli import main
from tieredstore.objectstore import LocalObjectStore
from tieredstore.objectstore.reads import READ_ATTEMPTS

RECORDS = 300  # all in one commit-log unit (the default chunk size)
LOOKS = 2  # verify looks at a queue with errors once more


def corrupt_store(tmp_path: Path) -> tuple[list[str], int]:
    """t/0 with RECORDS messages, a few bytes in the middle of its commit-log chunk
    changed (its stored CRC kept); the command line's location options, and the
    number of objects in the store. Written directly: the commit log in chunks,
    not log objects."""
    config = tmp_path / "direct.toml"
    config.write_text('[store]\nwrite_mode = "direct"\n')
    common = ["--config", str(config), "--data-dir", str(tmp_path / "data")]
    assert main(["produce", "--topic", "t", "--queue", "0", "--count", str(RECORDS),
                 "--size", "200", "-q", *common]) == 0

    async def damage() -> int:
        store = LocalObjectStore(tmp_path / "data", fsync=False)
        objects = await store.list_all("")
        chunks = [o.key for o in objects if "/commitlog/" in o.key and o.size > RECORDS * 200]
        assert len(chunks) == 1, chunks
        got = await store.get_object(chunks[0])
        data = bytearray(got.data)
        for i in range(4):
            data[len(data) // 2 + i] ^= 0xFF
        await store.put(chunks[0], bytes(data), metadata=dict(got.info.metadata))
        await store.close()
        return len(objects)

    return common, asyncio.run(damage())


def run(args: list[str], capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> tuple[int, str, str, int]:
    """The command's exit code, stdout, stderr and "read again" warnings."""
    capsys.readouterr()
    caplog.clear()
    code = main(args)
    captured = capsys.readouterr()
    warnings = sum(r.levelno == logging.WARNING and "read again after a failed check"
                   in r.message for r in caplog.records)
    return code, captured.out, captured.err, warnings


def test_verify_reads_a_corrupt_unit_a_bounded_number_of_times(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    common, objects = corrupt_store(tmp_path)
    code, out, _, warnings = run(["verify", "--json", *common], capsys, caplog)
    assert code == 1
    report = json.loads(out)
    assert report["error_count"] == 1, report
    [error] = report["queues"][0]["errors"]
    assert f"offsets [0, {RECORDS}): commit-log bytes unreadable" in error, error
    assert "CRC32C" in error, error
    # Each object read at most once a look, the damaged unit READ_ATTEMPTS times a look.
    assert report["requests"]["get"] <= LOOKS * (objects + READ_ATTEMPTS), report["requests"]
    assert 0 < warnings <= LOOKS * (READ_ATTEMPTS - 1), warnings


def test_consume_stops_at_a_corrupt_unit_with_one_error_and_bounded_warnings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    common, _ = corrupt_store(tmp_path)
    code, out, err, warnings = run(["consume", "--topic", "t", "--queue", "0", *common],
                                   capsys, caplog)
    assert (code, out) == (2, "")
    assert "CRC32C" in err and "expected" in err, err[-2000:]
    assert 0 < warnings <= READ_ATTEMPTS - 1, warnings
