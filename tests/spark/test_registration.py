"""A plain SparkSession reads the ``tieredstore`` format with no call to register:
PySpark registers the ``DefaultSource`` of the top-level ``pyspark_tieredstore``
module that an install puts beside the package. And a package shipped with
``ship_package`` is what executors import."""

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
    # As installed: the module on the path. (The editable install of the tests
    # maps the package but hides top-level modules from PySpark's lookup.)
    done = run_plain(merged_store.path, tmp_path, str(ROOT))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"rows {len(QUEUES) * PER_QUEUE}" in done.stdout
    # Without the module nothing registers the format: it is what does.
    hidden = run_plain(merged_store.path, tmp_path, None)
    assert hidden.returncode != 0
    assert "tieredstore" in hidden.stderr and "rows" not in hidden.stdout


SHIPPED = SESSION + """
from tieredstore.spark import register, ship_package
try:
    ship_package(spark, sys.argv[2])
    register(spark)

    def where(_):
        import tieredstore
        return tieredstore.__file__

    print("executor", spark.sparkContext.parallelize([1], 1).map(where).collect()[0])
    print("rows", spark.read.format("tieredstore").option("path", sys.argv[1]).load().count())
finally:
    spark.stop()
"""


def test_a_shipped_package_is_what_executors_import(merged_store: BuiltStore,
                                                    tmp_path: Path) -> None:
    done = run_script(SHIPPED, [str(merged_store.path), str(tmp_path)], tmp_path, None)
    assert done.returncode == 0, done.stderr[-3000:]
    executor = next(line for line in done.stdout.splitlines() if line.startswith("executor"))
    assert "tieredstore.zip/tieredstore/__init__.py" in executor, executor
    assert f"rows {len(QUEUES) * PER_QUEUE}" in done.stdout
    assert (tmp_path / "tieredstore.zip").is_file()
