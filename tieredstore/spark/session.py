"""Spark sessions for our jobs: local mode on loopback by default, a cluster's
master with this environment shipped to its workers, or spark-submit's.

Spark binds to the machine's external address unless told otherwise. In
local mode we set ``SPARK_LOCAL_IP=127.0.0.1`` (unless already set) while
the JVM starts, and ``spark.driver.host`` / ``spark.driver.bindAddress`` to
loopback, with the UI off: nothing listens beyond this machine. Under
spark-submit the JVM is already running with its own settings; we keep its
master and only add the loopback binds when that master is local.

Which Python Spark starts. PySpark runs one interpreter command, fixed when
the session starts (``PYSPARK_PYTHON``), both for the workers and for the
Python processes the driver's JVM starts to plan a data source read. In
local mode it is this interpreter (``sys.executable``), so a session started
from a virtual environment that is not activated still runs its workers in
it, not in the system's ``python3``. On a cluster (a master that is not
``local``) it is ``python3.X`` (this minor version) looked up on each
machine's ``PATH``: on the workers, their own Python, which imports tieredstore
and its dependencies from the pack shipped with the session
(:mod:`tieredstore.spark.shipping`); on the driver, the directory of this
interpreter comes first on the JVM's ``PATH``, so planning runs here with what
is installed here. Nothing points the workers at a path that exists on the
driver's machine only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tieredstore.spark.shipping import merge_conf, pack

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


def loopback_environment() -> dict[str, str]:
    """Environment for a JVM whose master runs on this machine (the caller's
    value kept if set)."""
    return {"SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", LOOPBACK)}


def this_python_environment() -> dict[str, str]:
    """Local mode: the workers (and the JVM's own Python processes) run this
    interpreter (the caller's values kept if set)."""
    return {key: os.environ.get(key, sys.executable)
            for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}


def cluster_environment(python: str) -> dict[str, str]:
    """What the JVM and this session start with for a cluster master: the workers'
    Python command, and this interpreter's directory first on ``PATH`` so that the
    driver's own processes find the same command here."""
    here = os.path.dirname(sys.executable)
    return {"PYSPARK_PYTHON": python,
            "PATH": os.pathsep.join([here, os.environ.get("PATH", os.defpath)])}


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set while the session starts (the JVM and
    the SparkContext take them then), and as it was after."""
    saved = {key: os.environ.pop(key, None) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key in values:
            os.environ.pop(key, None)
        os.environ.update({key: value for key, value in saved.items() if value is not None})


def session_running() -> bool:
    """Whether this process has an active SparkSession (a job's own session is the
    one it starts, and only that one it stops)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def register(spark: Any) -> None:
    """Register the ``tieredstore`` and ``tieredstore-ledger`` formats with
    ``spark``. No session setting is needed or changed: the readers take their
    selection from options only."""
    from tieredstore.spark.read.datasource import TieredStoreDataSource
    from tieredstore.spark.read.ledger_source import TieredStoreLedgerDataSource

    spark.dataSource.register(TieredStoreDataSource)
    spark.dataSource.register(TieredStoreLedgerDataSource)


def get_session(master: str | None = None, *, app_name: str = "tieredstore",
                conf: Mapping[str, str] | None = None,
                pack_dir: str | os.PathLike[str] | None = None) -> Any:
    """A SparkSession with the formats registered.

    ``master`` None: spark-submit's master when run by it (whose command line
    ships the environment: ``tieredstore spark pack`` prints it), else
    ``local[*]``. A master on this machine (:func:`on_loopback`) gets the
    loopback settings. A master that is not ``local`` gets this environment
    shipped (:func:`tieredstore.spark.shipping.pack`, cached in ``pack_dir``)
    and run by the workers' ``python3.X`` (``conf`` may name another with
    ``spark.pyspark.python``). The environment variables that choose the
    Python and the address are set while the session starts only, and as they
    were after (an error too): a JVM that this process started before keeps
    its own.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    settings = dict(conf or {})
    launch: dict[str, str] = {}
    if under_spark_submit() and master is None:
        from pyspark import SparkConf

        local = on_loopback(SparkConf().get("spark.master", DEFAULT_MASTER))
    else:
        master = master or DEFAULT_MASTER
        local = on_loopback(master)
        builder = builder.master(master)
        if local:
            launch |= loopback_environment()
        if master.startswith("local"):
            launch |= this_python_environment()
        else:
            settings = merge_conf(pack(pack_dir).conf(), settings)
            launch |= cluster_environment(settings["spark.pyspark.python"])
    settings = {**(LOCAL_CONF if local else {}), **settings}
    for key, value in settings.items():
        builder = builder.config(key, value)
    with environment(launch):
        spark = builder.getOrCreate()
    register(spark)
    return spark
