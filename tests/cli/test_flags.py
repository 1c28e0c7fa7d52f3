"""Flags read as the configuration reads its keys: sizes with their units, an
exporter's ``:PORT``; the ledger's flags named in errors as given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tieredstore.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("TIEREDSTORE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TIEREDSTORE_LOCAL_FSYNC", "false")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_produce_size_takes_the_configurations_units(
        clean: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--data-dir", "d", "produce", "--topic", "t", "--queue", "0",
                         "--count", "3", "--size", "2KiB", "--json")
    assert code == 0, err
    assert json.loads(out)["bytes"] == 3 * 2048
    code, out, err = run(capsys, "--data-dir", "d", "consume", "--topic", "t", "--queue", "0",
                         "--json")
    assert code == 0 and [len(json.loads(line)["body"]) for line in out.splitlines()] == \
        [2048] * 3, err
    # over max_message_size: refused as a size, by the store's own limit
    code, _, err = run(capsys, "--data-dir", "d", "produce", "--topic", "t", "--queue", "0",
                       "--count", "1", "--size", "10MiB")
    assert code == 2 and "--size 10485760 is larger than max_message_size = 4 MiB" in err, err


@pytest.mark.parametrize(("argv", "says"), [
    (["ledger", "sweep", "--name", "ml", "--deletion-lag", "4"],
     "config 'ledger_deletion_lag': '4' has no unit: write 4h or 4s"),
    (["ledger", "offload", "--name", "ml", "--offload-threshold-time", "1y"],
     "config 'offload_threshold_time': cannot read '1y' as a duration"),
    (["--cluster", "a/b", "inspect"], "config 'cluster': invalid cluster 'a/b'"),
])
def test_a_value_the_configuration_refuses_names_its_flag(
        clean: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    flag = next(a for a in argv if a.startswith("--") and a != "--name")
    code, _, err = run(capsys, "--data-dir", "d", *argv)
    assert code == 2 and says in err and err.rstrip().endswith(f"(given as {flag})"), err
    assert "given in code" not in err


def test_metrics_listen_on_a_port_alone_binds_the_metrics_host(
        clean: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--listen :0`` (as exporters take ``:9464``) serves on ``metrics_host``,
    127.0.0.1 by default, as ``--metrics-port`` binds."""
    code, _, err = run(capsys, "--data-dir", "d", "produce", "--topic", "t", "--queue", "0",
                       "--count", "2")
    assert code == 0, err
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TIEREDSTORE_")},
           "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "tieredstore.cli", "--data-dir", "d",
                                "metrics", "--listen", ":0"], cwd=clean, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving metrics on http://127.0.0.1:"), \
            (line, process.stderr.read() if process.poll() is not None and process.stderr
             else "")
        url = line.split()[-1]
        with urllib.request.urlopen(url, timeout=30) as reply:
            text = reply.read().decode()
        assert 'tieredstore_queue_max_offset{broker="broker-0",queue="0",topic="t"} 2.0' \
            in text, text[:2000]
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize(("given", "refused"), [("nowhere", True), (":x", True),
                                                ("[::1:9", True), ("host:70000", True),
                                                (":9465", False), ("9465", False)])
def test_metrics_listen_refuses_what_is_no_address(
        clean: Path, capsys: pytest.CaptureFixture[str], given: str, refused: bool) -> None:
    code, _, err = run(capsys, "--data-dir", "missing", "metrics", "--listen", given)
    assert code == 2, err
    if refused:
        assert "argument --listen: not HOST:PORT, :PORT or PORT" in err, err
    else:  # the address is read; the store is what is missing
        assert "no local store at 'missing'" in err, err
