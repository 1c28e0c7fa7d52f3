"""The jobs and both formats on a standalone Spark cluster (a master and a worker
on 127.0.0.1) whose worker runs a bare Python: no tieredstore, no pyarrow, no
crc32c, only the standard library, as on a fresh cluster node. The driver ships
the environment (:mod:`tieredstore.spark.shipping`): ``tieredstore spark
--master`` by itself, run from a virtual environment that is not activated;
docs/spark.md's ``spark-submit`` line (what ``tieredstore spark pack`` prints) for
the launcher and for a script of one's own, run from the activated one. The
drivers run in a directory the executors do not share: a relative ``--data-dir``
still reads the store. The worker has no S3 credentials (no ``AWS_*``, no
credentials file): a bucket is read with those the driver's chain resolved."""

from __future__ import annotations

import asyncio
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.conftest import QUICK_JVM
from tests.ledger.helpers import make_ledger
from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server, free_port
from tests.spark.conftest import PER_QUEUE, QUEUES, build_store
from tieredstore.ledger import LocalLedgerStore, OffloadOptions, SegmentLedgerOffloader
from tieredstore.objectstore import LocalObjectStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = len(QUEUES) * PER_QUEUE
VENV_BIN = Path(sys.executable).parent
ABSENT = ("tieredstore", "pyarrow", "crc32c", "boto3", "zstandard")
README_CACHE = "$HOME/.cache/tieredstore/spark"
README_MASTER = "spark://HOST:7077"
# boto3's chain, as far as the environment names it
AWS_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                   "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
                   "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_ROLE_ARN",
                   "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                   "AWS_CONTAINER_CREDENTIALS_FULL_URI")


def spark_home() -> Path:
    pyspark = pytest.importorskip("pyspark")
    return Path(pyspark.__file__).parent


def base_env(work: Path) -> dict[str, str]:
    """This environment without anything that would point Spark at a Python or
    at our code; Spark on loopback."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_", "TIEREDSTORE_"))
           and k not in ("PYTHONPATH", "VIRTUAL_ENV", *AWS_CREDENTIALS)}
    path = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if Path(p) != VENV_BIN]
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
               PATH=os.pathsep.join(path), SPARK_LOG_DIR=str(work),
               # JVMs that compile with C1 only (tests/conftest.py): speed, nothing else
               SPARK_SUBMIT_OPTS=QUICK_JVM, SPARK_LAUNCHER_OPTS=QUICK_JVM,
               SPARK_DAEMON_JAVA_OPTS=QUICK_JVM)
    return env


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a virtual environment of this Python's base
    interpreter with nothing installed (not even pip)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, bare_python: Path) -> Iterator[str]:
    """``spark://127.0.0.1:port`` of a master with one 2-core worker whose Python
    (``python3.X`` on its PATH) is the bare one."""
    if shutil.which("java") is None:
        pytest.skip("no java")
    work = tmp_path_factory.mktemp("cluster")
    env = base_env(work)
    env.update(PATH=os.pathsep.join([str(bare_python), env["PATH"]]),
               SPARK_WORKER_DIR=str(work / "worker"),
               # the executors the worker starts inherit it (C1 only, as every JVM here)
               JAVA_TOOL_OPTIONS=QUICK_JVM,
               # no REST submission server (its port is fixed), UIs on free ports
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
               # no credentials for the executors: no files, no instance metadata
               AWS_SHARED_CREDENTIALS_FILE=str(work / "no-credentials"),
               AWS_CONFIG_FILE=str(work / "no-config"), AWS_EC2_METADATA_DISABLED="true")
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = subprocess.run([python, "-c", "import importlib.util as u, sys; print(sys.prefix, "
                            f"[m for m in {ABSENT!r} if u.find_spec(m)])"],
                           env=env, cwd=work, capture_output=True, text=True, check=True
                           ).stdout.split()
    assert found == [str(bare_python.parent), "[]"], f"the worker's {python} is not bare: {found}"
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
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The drivers' directory: the store (a relative ``store``), the offloaded
    ledger (``ledgers``) and the pack cache (``XDG_CACHE_HOME``) in it."""
    work = tmp_path_factory.mktemp("driver")
    # Sealed segments left unmerged: compact has work to do.
    build_store(work / "store", merge_on_seal=False)
    asyncio.run(offload_ledger(work / "ledgers"))
    return work


ENTRIES = [random.Random(3).randbytes(n) for n in range(0, 3000, 50)]


async def offload_ledger(root: Path) -> None:
    source = LocalLedgerStore(root.parent / "bookie", fsync=False)
    store = LocalObjectStore(root, fsync=False)
    off = SegmentLedgerOffloader(store, options=OffloadOptions())
    try:
        handle = await make_ledger(source, ENTRIES)
        await off.offload(handle, uuid.UUID(int=5), {"ManagedLedgerName": "tenant/ns/t"})
    finally:
        await off.close()
        await store.close()


def driver_env(work: Path, *, activated: bool) -> dict[str, str]:
    """A driver's environment: our code on its path (this checkout), the pack
    cache in ``work``; the virtual environment activated or not."""
    env = base_env(work)
    env.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(work / "cache"))
    if activated:
        env.update(PATH=os.pathsep.join([str(VENV_BIN), env["PATH"]]),
                   VIRTUAL_ENV=str(VENV_BIN.parent))
    return env


def run(args: list[str], work: Path, *, activated: bool = False,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``args`` run in ``work`` by a driver (its environment, and ``env``): exit 0."""
    done = subprocess.run(args, cwd=work, env={**driver_env(work, activated=activated),
                                               **(env or {})},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{shlex.join(args)}:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done


def tieredstore(args: list[str], work: Path) -> str:
    return run([sys.executable, "-m", "tieredstore.cli", *args], work).stdout


def test_the_command_line_ships_the_environment(cluster: str, driver: Path) -> None:
    """``tieredstore spark --master``, its virtual environment not activated."""
    out = tieredstore(["spark", "--master", cluster, "export", "--data-dir", "store",
                       "--output", "cli-export"], driver)
    assert f"exported {MESSAGES} messages" in out, out
    from deltalake import DeltaTable

    assert DeltaTable(str(driver / "cli-export")).to_pyarrow_table().num_rows == MESSAGES


def test_the_executors_read_a_bucket_with_the_credentials_the_drivers_chain_resolved(
        cluster: str, driver: Path, moto: S3Server, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """``AWS_*`` set for the driver only (``tieredstore spark ... stats --bucket B
    --endpoint E``): every queue is read, by executors whose environment and
    files hold no credentials; neither the secret nor the session token shows in
    what the driver prints (Spark's log with it) or in the executors' logs."""
    bucket = f"chain-{uuid.uuid4().hex[:12]}"
    built = build_store(tmp_path, queues=QUEUES[:2], per_queue=30, backend="s3",
                        s3_bucket=bucket, s3_endpoint_url=moto.endpoint_url,
                        s3_region="us-east-1", s3_access_key_id=ACCESS_KEY,
                        s3_secret_access_key=SECRET_KEY)
    secret, token = f"driver-secret-{uuid.uuid4().hex}", f"driver-token-{uuid.uuid4().hex}"
    done = run([sys.executable, "-m", "tieredstore.cli", "spark", "--master", cluster,
                "stats", "--bucket", bucket, "--endpoint", moto.endpoint_url,
                "--region", "us-east-1"], driver,
               env={"AWS_ACCESS_KEY_ID": "driver-key-id", "AWS_SECRET_ACCESS_KEY": secret,
                    "AWS_SESSION_TOKEN": token})
    assert f"2 queue(s), {sum(map(len, built.messages.values()))} messages" in done.stdout, \
        done.stdout
    for hidden in (secret, token):
        assert hidden not in done.stdout + done.stderr
        for log in tmp_path_factory.getbasetemp().glob("cluster*/worker/app-*/*/std*"):
            assert hidden not in log.read_text(errors="replace"), log


def readme_line() -> list[str]:
    """The words of docs/spark.md's spark-submit line (up to the launcher)."""
    text = (ROOT / "docs" / "spark.md").read_text()
    line = next(block for block in re.findall(r"```sh\n(.*?)```", text, re.S)
                if "spark-submit" in block)
    # comments start at a word (as in the shell: a '#' inside a word is kept)
    words = shlex.split(re.sub(r"(^|\s)#.*", "", line.replace("\\\n", " "), flags=re.M))
    start = words.index("spark-submit")
    end = next(i for i, w in enumerate(words) if w.endswith("tieredstore_job.py"))
    return words[start:end + 1]


@pytest.fixture(scope="module")
def submit_line(cluster: str, driver: Path) -> list[str]:
    """What ``tieredstore spark pack`` prints, which docs/spark.md shows."""
    line = shlex.split(tieredstore(["spark", "--master", cluster, "pack"], driver).strip())
    cache = str(driver / "cache" / "tieredstore" / "spark")
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    as_in_readme = [re.sub(r"tieredstore-env-[0-9a-f]+\.tar", "tieredstore-env-<hash>.tar",
                           w.replace(cache, README_CACHE).replace(cluster, README_MASTER)
                           .replace(f"={python}", "=python3.11"))  # the example in docs/spark.md
                    for w in line]
    assert as_in_readme == readme_line()
    return line


def test_the_readme_spark_submit_line_runs_a_job(submit_line: list[str], driver: Path) -> None:
    done = run([*submit_line, "verify", "--data-dir", "store"], driver, activated=True)
    assert f"queues {len(QUEUES)}, messages" in done.stdout, done.stdout


SCRIPT = """
import sys
from tieredstore.cli import main
from tieredstore.spark import get_session

spark = get_session()   # spark-submit's master, with the pack its line ships


def where(_):
    import sys
    import tieredstore
    return sys.executable, tieredstore.__file__


print("executor", *spark.sparkContext.parallelize([1], 1).map(where).collect()[0])
df = spark.read.format("tieredstore").option("path", "store").load()
print("messages", df.count(), df.where("topic = 'orders' and offset >= 200").count())
ledger = spark.read.format("tieredstore-ledger").option("path", "ledgers").load()
print("entries", ledger.count(), ledger.selectExpr("sum(length(payload))").first()[0])
for job in (["stats"], ["compact"], ["verify"], ["export", "--output", "submit-export"]):
    print("job", *job, "exit", main(["spark", *job, "--data-dir", "store"]), flush=True)
spark.stop()
"""


def test_a_script_reads_and_runs_every_job_with_the_readme_line(
        submit_line: list[str], driver: Path, bare_python: Path) -> None:
    (driver / "script.py").write_text(SCRIPT)
    out = run([*submit_line[:-1], "script.py"], driver, activated=True).stdout
    executor = next(ln for ln in out.splitlines() if ln.startswith("executor")).split()
    assert Path(executor[1]).parent == bare_python, executor
    assert executor[2].endswith("/tieredstore-env/tieredstore/__init__.py"), executor
    assert f"messages {MESSAGES} {3 * (PER_QUEUE - 200)}" in out, out
    assert f"entries {len(ENTRIES)} {sum(map(len, ENTRIES))}" in out, out
    assert f"{len(QUEUES)} queue(s), {MESSAGES} messages" in out, out
    merged = re.search(r"(\d+) of (\d+) segments merged", out)
    assert merged is not None and merged[1] == merged[2] and int(merged[1]) > 0, out
    assert f"queues {len(QUEUES)}, messages" in out, out
    assert f"exported {MESSAGES} messages" in out, out
    for job in ("stats", "compact", "verify", "export"):
        assert f"job {job}" in out and re.search(rf"job {job}.* exit 0", out), out
