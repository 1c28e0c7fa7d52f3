"""The jobs on a standalone Spark cluster (a master and a worker on 127.0.0.1),
started the way ``tieredstore spark`` is, from a directory the executors do
not share: a relative ``--path`` still reads the store."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import free_port
from tests.spark.conftest import PER_QUEUE, QUEUES, build_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def spark_home() -> Path:
    pyspark = pytest.importorskip("pyspark")
    return Path(pyspark.__file__).parent


def loopback_env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, SPARK_LOG_DIR=str(work),
               SPARK_WORKER_DIR=str(work / "worker"),
               # no REST submission server (its port is fixed), UIs on free ports
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    return env


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {log}:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:port`` of a master with one 2-core worker."""
    if shutil.which("java") is None:
        pytest.skip("no java")
    work = tmp_path_factory.mktemp("cluster")
    env = loopback_env(work)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name, args, ready in [
            ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(port), "--webui-port", str(free_port())],
             "I have been elected leader"),
            ("worker", ["org.apache.spark.deploy.worker.Worker", master_url, "--host",
                        "127.0.0.1", "--cores", "2", "--memory", "1g", "--webui-port",
                        str(free_port()), "--work-dir", str(work / "worker")],
             "Successfully registered with master"),
        ]:
            log = work / f"{name}.log"
            with log.open("wb") as out:
                processes.append(subprocess.Popen([spark_class, *args], env=env, stdout=out,
                                                  stderr=subprocess.STDOUT, cwd=work,
                                                  start_new_session=True))
            wait_for(log, ready, processes[-1], within=90)
        yield master_url
    finally:
        for p in reversed(processes):
            p.terminate()
        for p in processes:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = loopback_env(cwd)
    return subprocess.run([sys.executable, "-m", "tieredstore.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_jobs_on_a_standalone_cluster_with_a_relative_path(cluster: str,
                                                           tmp_path: Path) -> None:
    build_store(tmp_path / "store")
    stats = run_cli(["spark", "--master", cluster, "stats", "--path", "store"], tmp_path)
    assert stats.returncode == 0, stats.stdout + stats.stderr[-3000:]
    assert f"{len(QUEUES)} queue(s), {len(QUEUES) * PER_QUEUE} messages" in stats.stdout
    verify = run_cli(["spark", "--master", cluster, "verify", "--path", "store"], tmp_path)
    assert verify.returncode == 0, verify.stdout + verify.stderr[-3000:]
    assert f"{len(QUEUES)} queue(s) verified, 0 with problems" in verify.stdout
