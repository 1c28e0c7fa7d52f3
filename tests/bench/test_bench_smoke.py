"""The benchmark suite still runs: every benchmark, tiny sizes, local backend only.

Figures are not checked (these are benchmarks, not timed tests); what is
checked is that each benchmark produces its table and the report is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.__main__ import main

pytestmark = pytest.mark.slow


def test_every_benchmark_runs_and_writes_its_table(tmp_path: Path) -> None:
    report = tmp_path / "BENCHMARKS.md"
    tables = main(["--tiny", "--backends", "local", "--output", str(report)])

    titles = [t.title for t in tables]
    # segment_cost and chunk_size are left out of tiny runs (1 GiB in memory whatever
    # the size).
    expected = ["Sequential catch-up read", "Catch-up consume through get",
                "get of 1 KiB messages", "Tailing read", "Random 4 KiB reads", "Write:",
                "Memory:", "Append:", "Quiet queues:", "The hourly bill of",
                "Busy queues, writing:",
                "Busy queues, sealing:", "Restart at scale:", "Flushing producers:",
                "Spark scan:", "Encryption:", "Encryption and compression:"]
    assert [next((e for e in expected if t.startswith(e)), t) for t in titles] == expected
    for table in tables:
        if table.title.startswith("Encryption:"):  # SeaweedFS only: not run here
            assert table.notes == ["not run: needs SeaweedFS"] and not table.rows
            continue
        assert table.rows, f"{table.title!r} has no rows"
        if not table.title.startswith(("Quiet queues", "The hourly bill", "Busy queues",
                                       "Flushing producers", "Spark scan", "Encryption and",
                                       "Restart at scale")):
            assert all(row[0] == "local" for row in table.rows), table.title
    text = report.read_text()
    for title in titles:
        assert f"### {title}" in text
    assert "## Reproduce" in text
