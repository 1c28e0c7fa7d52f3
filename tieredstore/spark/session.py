"""Spark sessions for our jobs: local mode on loopback by default, or spark-submit's.

Spark binds to the machine's external address unless told otherwise. In
local mode we set ``SPARK_LOCAL_IP=127.0.0.1`` (unless already set) before
the JVM starts, and ``spark.driver.host`` / ``spark.driver.bindAddress`` to
loopback, with the UI off: nothing listens beyond this machine. Under
spark-submit the JVM is already running with its own settings; we keep its
master and only add the loopback binds when that master is local.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
DEFAULT_MASTER = "local[*]"

LOCAL_CONF = {
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def on_loopback(master: str) -> bool:
    """Whether ``master`` runs on this machine only: local mode, or a standalone
    master on a loopback address (the driver then binds to loopback too)."""
    host = master.removeprefix("spark://").split(":", 1)[0]
    return master.startswith("local") or (master.startswith("spark://")
                                          and host in ("127.0.0.1", "localhost"))


def under_spark_submit() -> bool:
    """Whether this Python process was started by spark-submit (its JVM is up)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def use_loopback() -> None:
    """Environment for a local-mode JVM and its Python workers (set only if unset)."""
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def session_running() -> bool:
    """Whether this process has an active SparkSession (a job's own session is the
    one it starts, and only that one it stops)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


SHIPPED_SUFFIXES = (".py", ".pyi", ".proto", ".typed")


def ship_package(spark: Any, directory: str | os.PathLike[str] | None = None) -> Path:
    """Zip this ``tieredstore`` package (and the ``pyspark_tieredstore*`` modules
    beside it) and add it to every executor's Python path
    (``SparkContext.addPyFile``), for workers that do not have it installed. Its
    dependencies (boto3, aioboto3, protobuf, crc32c, diskcache...) must be on the
    workers already. The zip is written in ``directory`` (default: a new
    temporary directory); its path is returned."""
    import tieredstore

    package = Path(tieredstore.__file__).resolve().parent
    root = package.parent
    out = Path(directory or tempfile.mkdtemp(prefix="tieredstore-ship-")) / "tieredstore.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            if path.is_file() and path.suffix in SHIPPED_SUFFIXES \
                    and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(root).as_posix())
        for module in sorted(root.glob("pyspark_tieredstore*.py")):
            archive.write(module, module.name)
    spark.sparkContext.addPyFile(str(out))
    return out


def register(spark: Any) -> None:
    """Register the ``tieredstore`` and ``tieredstore-ledger`` formats with
    ``spark``. No session setting is needed or changed: the readers take their
    selection from options only."""
    from tieredstore.spark.datasource import TieredStoreDataSource
    from tieredstore.spark.ledger_source import TieredStoreLedgerDataSource

    spark.dataSource.register(TieredStoreDataSource)
    spark.dataSource.register(TieredStoreLedgerDataSource)


def get_session(master: str | None = None, *, app_name: str = "tieredstore",
                conf: Mapping[str, str] | None = None) -> Any:
    """A SparkSession with the format registered.

    ``master`` None: spark-submit's master when run by it, else ``local[*]``.
    A master on this machine (:func:`on_loopback`) gets the loopback settings.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if under_spark_submit() and master is None:
        from pyspark import SparkConf

        local = on_loopback(SparkConf().get("spark.master", DEFAULT_MASTER))
    else:
        master = master or DEFAULT_MASTER
        local = on_loopback(master)
        builder = builder.master(master)
        if local:
            use_loopback()
    settings = {**(LOCAL_CONF if local else {}), **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
