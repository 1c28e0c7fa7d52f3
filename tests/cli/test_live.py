"""Read-only commands beside a live writer report no error that is not there.

A writer process appends, rolls, seals and merges for a while; ``verify`` and
``consume`` run in a loop beside it. Every run must pass: a chunk gone because
its merge completed is read from the merged object, and the consume queue is
listed before the commit log it points into. TIEREDSTORE_LIVE_SECONDS sets how
long (the issue's proof ran it for a minute).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tieredstore.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SECONDS = float(os.environ.get("TIEREDSTORE_LIVE_SECONDS", "15"))
SMALL = """
[segments]
chunk_size = "4KiB"
commit_log_max_size = "32KiB"
consume_queue_max_size = "2KiB"
[store]
metadata_page_size = 4
"""


def test_verify_and_consume_beside_a_live_writer(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    config = tmp_path / "small.toml"
    config.write_text(SMALL)
    writer = subprocess.Popen([sys.executable, "-m", "tests.cli.live_writer", str(data),
                               str(SECONDS)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "OPEN"
    runs: list[tuple[str, int, str]] = []
    try:
        deadline = time.monotonic() + SECONDS - 1
        while time.monotonic() < deadline:
            for args in (["verify", "-q"],
                         ["consume", "-q", "--topic", "t", "--queue", str(len(runs) % 3)]):
                capsys.readouterr()
                code = main([*args, "--config", str(config), "--data-dir", str(data)])
                out = capsys.readouterr()
                runs.append((args[0], code, out.out[-2000:] + out.err[-2000:]))
    finally:
        writer.wait(timeout=SECONDS + 60)
    done = writer.stdout.read()
    assert "DONE" in done
    failed = [r for r in runs if r[1] != 0]
    assert not failed, f"{len(failed)} of {len(runs)} runs failed beside the writer:\n" + \
        "\n".join(f"{cmd} exited {code}: {out}" for cmd, code, out in failed[:3])
    assert sum(1 for r in runs if r[0] == "verify") >= 3
    capsys.readouterr()
    assert main(["verify", "-q", "--config", str(config), "--data-dir", str(data)]) == 0
