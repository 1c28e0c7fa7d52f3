"""Rows L of docs/errors.md: every failure of the ``tieredstore`` command is one
line on stderr and exit 2 (1 stays "found something wrong"); ``--debug`` adds
the traceback. After each case, the messages produced before read back."""

from __future__ import annotations

import errno
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.errors.helpers import Case, cases_by_id
from tieredstore.cli import main
from tieredstore.objectstore import LocalObjectStore

CONFIG = """\
[backend]
local_fsync = false
[pool]
group_commit_interval = 0.01
"""
LINES = [f"line {i} " + "x" * i for i in range(12)]


class Cli:
    def __init__(self, tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp = tmp
        self.capsys = capsys
        self.data = tmp / "data"
        self.config = tmp / "conf.toml"
        self.config.write_text(CONFIG)
        self.debug: list[str] = []
        (tmp / "lines.txt").write_text("".join(f"{line}\n" for line in LINES))

    def __call__(self, *args: str, common: bool = True) -> tuple[int, str, str]:
        self.capsys.readouterr()
        extra = ["--config", str(self.config), "--data-dir", str(self.data)] if common else []
        try:
            code = main([*args, *extra])
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def bodies(self) -> list[str]:
        code, out, err = self("consume", "--topic", "t", "--queue", "0", "--json")
        assert code == 0, err
        return [json.loads(line)["body"] for line in out.splitlines()]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in list(os.environ):
        if name.startswith("TIEREDSTORE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    cli = Cli(tmp_path, capsys)
    code, _, err = cli("produce", "--topic", "t", "--queue", "0", "--file",
                       str(tmp_path / "lines.txt"))
    assert code == 0, err
    assert cli.bodies() == LINES
    return cli


def produce(*args: str) -> Callable[[Cli], tuple[int, str, str]]:
    return lambda cli: cli("produce", "--topic", "t", "--queue", "0", *args)


def consume(*args: str, **env: str) -> Callable[[Cli], tuple[int, str, str]]:
    def run(cli: Cli) -> tuple[int, str, str]:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return cli("consume", "--topic", "t", "--queue", "0", *args)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return run


def full_disk(cli: Cli) -> tuple[int, str, str]:
    """``produce`` on a full disk: the local backend's write fails with ENOSPC."""
    original = LocalObjectStore.put

    async def put(self: LocalObjectStore, key: str, data: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.root / key))

    LocalObjectStore.put = put  # type: ignore[method-assign,assignment]
    try:
        return cli("produce", "--topic", "t", "--queue", "0", "--count", "3")
    finally:
        LocalObjectStore.put = original  # type: ignore[method-assign]


def unexpected(cli: Cli) -> tuple[int, str, str]:
    """A bug in a command (any exception the library did not expect)."""
    from tieredstore.cli.store import produce as produce_cmd

    original = produce_cmd.generated

    def broken(count: int, size: int) -> Any:
        raise RuntimeError("something no one foresaw")

    produce_cmd.generated = broken
    try:
        return cli("produce", "--topic", "t", "--queue", "0", "--count", "3", *cli.debug)
    finally:
        produce_cmd.generated = original


def in_seconds(cli: Cli) -> tuple[int, str, str]:
    """``--timestamp`` given in seconds (now)."""
    return produce("--count", "1", "--timestamp", str(int(time.time())))(cli)


CASES = cases_by_id(
    Case("L01", produce("--count", "1", "--size", "99999999999"), SystemExit,
         r"^tieredstore: --size 99999999999 is larger than max_message_size = 4 MiB$"),
    Case("L02", produce("--count", "1", "--timestamp", str(2**63)), SystemExit,
         r"^tieredstore produce: argument --timestamp: must be at most 2\^63 - 1 milliseconds, "
         r"got 9223372036854775808 \(see tieredstore produce --help\)$"),
    Case("L03", in_seconds, SystemExit,
         r"^tieredstore: timestamp: \d+ looks like seconds since the epoch .*timestamps are "
         r"milliseconds: \d+$"),
    Case("L04", full_disk, SystemExit,
         r"^tieredstore: No space left on device: '.*' \(OSError, errno 28\) \(--debug shows "
         r"the traceback\)$"),
    Case("L05", lambda cli: cli("consume", "--topic", "t", "--queue", "0", "--config",
                                str(cli.tmp), common=False), SystemExit,
         r"^tieredstore: --config: '.*' is a directory, not a TOML file$"),
    Case("L06", lambda cli: (cli.tmp / "b.toml").write_bytes(b"\xff\xfe") and
         cli("consume", "--topic", "t", "--queue", "0", "--config", str(cli.tmp / "b.toml"),
             common=False), SystemExit,
         r"^tieredstore: --config: '.*b.toml' is not a TOML file: not UTF-8 text"),
    Case("L07", consume(TIEREDSTORE_POOL_BYTES="infKiB"), SystemExit,
         r"^tieredstore: config 'pool_bytes': cannot read 'infKiB' as a size: .*"
         r"\(from TIEREDSTORE_POOL_BYTES\)$"),
    Case("L09", consume("--from-time", str(2**64)), SystemExit,
         r"^tieredstore consume: argument --from-time: must be at most 2\^63 - 1 milliseconds"),
    Case("L10", produce("--queue", "x"), SystemExit,
         r"^tieredstore produce: argument --queue: not an integer: 'x' \(see tieredstore "
         r"produce --help\)$"),
    Case("L11", lambda cli: cli("produce", "--topic", "t", "--queue", "0", "--count", "1",
                                "--size", "5000000"), SystemExit,
         r"^tieredstore: --size 5000000 is larger than max_message_size = 4 MiB$"),
    Case("L12", unexpected, SystemExit,
         r"^tieredstore: RuntimeError: something no one foresaw \(--debug shows the "
         r"traceback\)$"),
    Case("L13", produce("--count", "1", "--tag", "\udcff"), SystemExit,
         r"^tieredstore: tags: '\\udcff' is not valid Unicode text"),
    Case("L14", lambda cli: cli("consume", "--topic", "t", "--queue", "0", "--data-dir",
                                str(cli.tmp / "missing"), common=False), SystemExit,
         r"^tieredstore: no local store at '.*missing'"),
    Case("L16", lambda cli: cli("gc", "--safety-age", "400d"), SystemExit,
         r"^tieredstore gc: argument --safety-age: must be a duration in "
         r"\[0 s, 365 d\], got '400d' \(see tieredstore gc --help\)$"),
    Case("L17", lambda cli: cli("consume", "--topic", "t", "--queue", "0", "--bucket", "a b",
                                common=False), SystemExit,
         r"^tieredstore: config 's3_bucket': 'a b' is not a bucket name: .* "
         r"\(given as --bucket\)$"),
    Case("L18", lambda cli: cli("consum", "--topic", "t", "--queue", "0"), SystemExit,
         r"^tieredstore: argument COMMAND: invalid choice: 'consum'; did you mean "
         r"'consume'\? \(choose from .*\) \(see tieredstore --help\)$"),
    Case("L19", lambda cli: cli("ledger", "offload", "--name", "ml", "--before", "1"),
         SystemExit,
         r"^tieredstore ledger offload: argument --before: expected LEDGER:ENTRY, a position "
         r"\(e.g. 3:0: every closed ledger before ledger 3\), got '1' \(see .*\)$"),
    Case("L20", produce("--count", "1", "--size", "10MB"), SystemExit,
         r"^tieredstore produce: argument --size: '10MB': MB is ambiguous \(10\^6 or 2\^20 "
         r"bytes\); write 10MiB \(10485760 bytes\) or 10000000 \(bytes\) \(see .*\)$"),
)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1s", "1e12", "72", "soon"])
def test_gc_refuses_a_safety_age_it_cannot_use(cli: Cli, value: str) -> None:
    """Row L16 for the other values ``float`` reads but no age is (and text)."""
    code, _, err = cli("gc", "--safety-age", value)
    assert code == 2, err
    assert err.startswith("tieredstore gc: argument --safety-age: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert cli.bodies() == LINES


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_every_failure_is_one_line_and_exit_2(cli: Cli, case_id: str) -> None:
    code, out, err = CASES[case_id].call(cli)
    assert code == 2, (code, out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(CASES[case_id].match, err.strip()), err
    assert cli.bodies() == LINES


def test_debug_shows_the_traceback(cli: Cli) -> None:
    """Row L08: ``--debug`` prints the traceback, then the same one line."""
    cli.debug = ["--debug"]
    code, _, err = unexpected(cli)
    assert code == 2
    assert err.startswith("Traceback (most recent call last):"), err
    assert err.rstrip().endswith("tieredstore: RuntimeError: something no one foresaw")
    assert cli.bodies() == LINES


CASES_WITHOUT_ERROR = {"L08": test_debug_shows_the_traceback}


def test_gc_safety_age_needs_a_unit_as_gc_safety_age_does(cli: Cli) -> None:
    """``--safety-age 72`` is the key ``gc_safety_age = 72``: refused (72 seconds to
    one operator, 72 hours to another, and too short an age deletes what a writer is
    about to reference); a duration with a unit is read as the key reads it."""
    code, _, err = cli("gc", "--safety-age", "72")
    assert code == 2, err
    assert err.startswith("tieredstore gc: argument --safety-age: '72' has no unit"), err
    assert err.count("\n") == 1, err
    assert cli.bodies() == LINES
    code, out, err = cli("gc", "--dry-run", "--safety-age", "2h")
    assert code == 0, err
    assert "dry run" in out
    code, out, err = cli("gc", "--dry-run", "--safety-age", "0")
    assert code == 0, err


def test_metrics_min_interval_takes_a_unit(cli: Cli) -> None:
    """``--min-interval 5m`` is read (a plain number stays seconds): the error is
    about the next option, a bad ``--listen``."""
    for value in ("5m", "90"):
        code, _, err = cli("metrics", "--min-interval", value, "--listen", "nowhere")
        assert code == 2, err
        assert err.startswith("tieredstore metrics: argument --listen: "), err
