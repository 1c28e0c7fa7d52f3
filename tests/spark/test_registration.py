"""A plain SparkSession reads the ``tieredstore`` format with no call to register:
PySpark registers the ``DefaultSource`` of the top-level ``pyspark_tieredstore``
module that an install puts beside the package. (Workers without the package:
``tests/spark/test_cluster.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import PER_QUEUE, QUEUES, BuiltStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]  # where pyspark_tieredstore.py is

SESSION = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").getOrCreate())
"""

PLAIN = SESSION + """
try:
    print("rows", spark.read.format("tieredstore").option("path", sys.argv[1]).load().count())
finally:
    spark.stop()
"""


def run_script(script: str, args: list[str], cwd: Path, pythonpath: str | None
               ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", script, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def run_plain(path: Path, cwd: Path, pythonpath: str | None) -> subprocess.CompletedProcess[str]:
    return run_script(PLAIN, [str(path)], cwd, pythonpath)


def test_a_plain_session_finds_the_format(merged_store: BuiltStore, tmp_path: Path) -> None:
    # As installed: the module on the path.
    done = run_plain(merged_store.path, tmp_path, str(ROOT))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"rows {len(QUEUES) * PER_QUEUE}" in done.stdout
    # Without the module's DefaultSource nothing registers the format: it is what
    # does. (A module of the same name without it comes first on the path.)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pyspark_tieredstore.py").write_text('"""No DefaultSource here."""\n')
    hidden = run_plain(merged_store.path, tmp_path, os.pathsep.join([str(shadow), str(ROOT)]))
    assert hidden.returncode != 0
    assert "tieredstore" in hidden.stderr and "rows" not in hidden.stdout
