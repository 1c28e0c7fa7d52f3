"""The pack of tieredstore and its dependencies for a cluster's workers: what goes
in, its cache, the settings that ship it. (That a bare worker runs with it:
``test_cluster.py``.)"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from tests.spark.conftest import PER_QUEUE, QUEUES, BuiltStore
from tieredstore.spark import shipping
from tieredstore.spark.session import environment


def test_the_closure_is_the_runtime_requirements_and_pyarrow_not_spark() -> None:
    names = {shipping.metadata_name(d) for d in shipping.closure()}
    # direct requirements, the spark extra's pyarrow, and requirements of requirements
    assert {"aioboto3", "boto3", "crc32c", "protobuf", "zstandard", "pyarrow",
            "botocore", "aiobotocore", "jmespath"} <= names, names
    assert not names & {"pyspark", "py4j", "pytest", "moto", "mypy", "ruff"}, names


@pytest.mark.slow
def test_a_pack_holds_the_package_and_its_dependencies_and_is_built_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = shipping.pack(tmp_path)
    with tarfile.open(built.archive) as tar:
        names = set(tar.getnames())
    assert {"tieredstore/__init__.py", "tieredstore/spark/read/datasource.py",
            "pyspark_tieredstore.py", "pyarrow/__init__.py", "crc32c/__init__.py",
            "boto3/__init__.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") or n.startswith(("pyspark/", "py4j/"))
                   for n in names)
    assert any(n.startswith("pyarrow-") and n.endswith(".dist-info/METADATA") for n in names)
    stamp = built.archive.stat().st_mtime_ns
    assert shipping.pack(tmp_path) == built
    assert built.archive.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    # Another source gives another archive.
    extra = tmp_path / "extra.py"
    extra.write_text("x = 1\n")
    files = shipping.package_files

    def more() -> Iterator[tuple[Path, str]]:
        yield from files()
        yield extra, "tieredstore/extra.py"

    monkeypatch.setattr(shipping, "package_files", more)
    assert shipping.pack(tmp_path).archive != built.archive


def test_the_settings_and_the_line_that_ship_it(tmp_path: Path) -> None:
    built = shipping.Pack(tmp_path / "tieredstore-env-0.tar.gz", tmp_path / "job.py",
                          "python3.11")
    conf = built.conf()
    assert conf == {"spark.archives": f"{built.archive}#tieredstore-env",
                    "spark.executorEnv.PYTHONPATH": "tieredstore-env",
                    "spark.pyspark.python": "python3.11"}
    assert shlex.split(built.submit_line("spark://h:7077")) == [
        "spark-submit", "--master", "spark://h:7077", "--archives", conf["spark.archives"],
        "--conf", "spark.executorEnv.PYTHONPATH=tieredstore-env",
        "--conf", "spark.pyspark.python=python3.11", str(built.launcher)]
    mine = {"spark.archives": "other.zip#o", "spark.executorEnv.PYTHONPATH": "o",
            "spark.pyspark.python": "/opt/py/bin/python3.11", "spark.x": "1"}
    assert shipping.merge_conf(conf, mine) == {
        "spark.archives": f"{conf['spark.archives']},other.zip#o",
        "spark.executorEnv.PYTHONPATH": f"tieredstore-env{os.pathsep}o",
        "spark.pyspark.python": "/opt/py/bin/python3.11", "spark.x": "1"}
    assert shipping.merge_conf(conf, {}) == conf
    assert shipping.worker_python() == f"python{sys.version_info[0]}.{sys.version_info[1]}"


def test_the_launch_environment_is_set_while_it_lasts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_KEPT", "before")
    monkeypatch.delenv("TS_NEW", raising=False)
    with environment({"TS_KEPT": "during", "TS_NEW": "during"}):
        assert (os.environ["TS_KEPT"], os.environ["TS_NEW"]) == ("during", "during")
        os.environ["TS_OTHER"] = "set by the session"
    assert os.environ["TS_KEPT"] == "before" and "TS_NEW" not in os.environ
    assert os.environ.pop("TS_OTHER") == "set by the session"


LOCAL = """
import sys
from tieredstore.spark import get_session

spark = get_session("local[1]")
print("worker", spark.sparkContext.parallelize([1], 1).map(lambda _: sys.executable).first())
print("rows", spark.read.format("tieredstore").option("path", sys.argv[1]).load().count())
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.spark
def test_a_local_session_runs_its_workers_in_this_interpreter(merged_store: BuiltStore,
                                                              tmp_path: Path) -> None:
    """Started from a virtual environment that is not activated (no PYSPARK_*
    variables, its bin not on PATH), where ``python3`` has no tieredstore."""
    venv_bin = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")
           and k != "VIRTUAL_ENV"}
    env.update(PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                    if Path(p) != venv_bin),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]), SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([sys.executable, "-c", LOCAL, str(merged_store.path)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"worker {sys.executable}\n" in done.stdout, done.stdout
    assert f"rows {len(QUEUES) * PER_QUEUE}" in done.stdout, done.stdout


def fake_dist(site: Path, name: str, version: str, requires: tuple[str, ...] = (),
              modules: dict[str, str] | None = None) -> metadata.PathDistribution:
    """An installed distribution in ``site`` as pip leaves it: its modules, its
    ``dist-info`` with ``METADATA`` and a ``RECORD`` listing every file."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    names = [f"{info.name}/METADATA"]
    for module, text in (modules or {}).items():
        (site / module).write_text(text)
        names.append(module)
    (info / "RECORD").write_text("".join(f"{n},,\n" for n in [*names, f"{info.name}/RECORD"]))
    return metadata.PathDistribution(info)


def test_a_requirement_asking_for_an_extra_brings_that_extras_requirements(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``alpha[fast]`` needs what alpha's ``fast`` extra lists, as pip installed it;
    another extra of alpha is still left out."""
    fake_dist(tmp_path, "tieredstore", "9.0", ("tsfake-alpha[fast]>=1",
                                               'tsfake-delta; extra == "spark"'))
    fake_dist(tmp_path, "tsfake-alpha", "1.0", ('tsfake-beta; extra == "fast"',
                                                'tsfake-gamma; extra == "slow"'))
    for name in ("tsfake-beta", "tsfake-gamma", "tsfake-delta"):
        fake_dist(tmp_path, name, "1.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = [shipping.metadata_name(d) for d in shipping.closure()]
    assert names == ["tsfake-alpha", "tsfake-beta", "tsfake-delta"], names


def test_a_dependency_reinstalled_with_other_files_gives_another_pack(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same name and version, other bytes (a local build, a patched wheel, a file
    edited in place): the cached pack must not ship the old bytes."""
    site = tmp_path / "site"
    dist = fake_dist(site, "tsfake-alpha", "1.0", modules={"tsfake_alpha.py": "x = 1\n"})
    monkeypatch.setattr(shipping, "closure", lambda: [dist])
    package = tmp_path / "pkg.py"
    package.write_text("")
    monkeypatch.setattr(shipping, "package_files", lambda: iter([(package, "tieredstore/p.py")]))

    def shipped() -> bytes:
        with tarfile.open(shipping.pack(tmp_path / "cache").archive) as tar:
            member = tar.extractfile("tsfake_alpha.py")
            assert member is not None
            return member.read()

    assert shipped() == b"x = 1\n"
    dist = fake_dist(site, "tsfake-alpha", "1.0", modules={"tsfake_alpha.py": "x = 2 # fixed\n"})
    assert shipped() == b"x = 2 # fixed\n"


@pytest.mark.parametrize("master", ["local[1]", "spark://127.0.0.1:7077"])
def test_a_session_leaves_the_environment_as_it_was_even_when_it_fails_to_start(
        master: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables that choose Spark's Python and address are the session's
    start's, not the rest of this process's (a later session of the user's own,
    a subprocess): set while it starts, restored after, also on an error."""
    from pyspark.sql import SparkSession

    from tieredstore.spark import session

    for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(session, "pack", lambda _: shipping.Pack(
        tmp_path / "env.tar.gz", tmp_path / "job.py", "python3.11"))
    seen: dict[str, str] = {}

    def fail(_: object) -> None:
        seen.update(os.environ)
        raise RuntimeError("the JVM did not start")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", fail)
    before = dict(os.environ)
    with pytest.raises(RuntimeError, match="JVM"):
        session.get_session(master)
    assert dict(os.environ) == before
    assert seen["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert seen["PYSPARK_PYTHON"] == (sys.executable if master.startswith("local")
                                      else "python3.11")


def test_a_dependency_installed_editable_is_refused_with_what_to_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pip install -e`` leaves only a path hook in the site directory: its code
    is elsewhere, and a pack of its RECORD would ship none of it."""
    site = tmp_path / "site"
    dist = fake_dist(site, "tsfake-alpha", "1.0",
                     modules={"__editable__.tsfake_alpha-1.0.pth": str(tmp_path / "src")})
    (site / "tsfake_alpha-1.0.dist-info" / "direct_url.json").write_text(
        '{"url": "file:///src/alpha", "dir_info": {"editable": true}}')
    with pytest.raises(shipping.PackError, match=r"tsfake-alpha.*editable.*without -e"):
        list(shipping.dist_files([dist]))


@pytest.mark.parametrize("folder", ["with space", "a#b", "a,b", "100%"])
def test_an_archive_whose_path_a_uri_would_escape_is_named_by_its_uri(
        tmp_path: Path, folder: str) -> None:
    """Spark reads ``spark.archives`` as URIs, comma-separated: a cache under
    ``/home/Jane Doe`` failed with NoSuchFileException ('.../Jane
    Doe/...tar.gz#tieredstore-env', the alias taken for part of the name)."""
    built = shipping.Pack(tmp_path / folder / "tieredstore-env-0.tar.gz", tmp_path / "job.py",
                          "python3.11")
    uri = "file://" + str(tmp_path / folder / "tieredstore-env-0.tar.gz").replace(
        "%", "%25").replace(" ", "%20").replace("#", "%23").replace(",", "%2C")
    assert built.conf()["spark.archives"] == f"{uri}#tieredstore-env"
    assert shlex.split(built.submit_line("spark://h:7077"))[4] == f"{uri}#tieredstore-env"


def test_a_pack_is_on_disk_before_it_takes_its_name(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A name is never rebuilt: were the rename to reach the disk before the
    bytes (a machine that stops just after), an empty archive would be used
    for good. So each file is flushed to the disk, then renamed."""
    package = tmp_path / "pkg.py"
    package.write_text("x = 1\n")
    monkeypatch.setattr(shipping, "closure", lambda: [])
    monkeypatch.setattr(shipping, "package_files", lambda: iter([(package, "tieredstore/p.py")]))
    events: list[str] = []
    fsync, replace = os.fsync, os.replace

    def synced(fd: int) -> None:
        events.append(f"fsync {os.fstat(fd).st_size > 0}")
        fsync(fd)

    def renamed(source: str, target: str) -> None:
        events.append(f"replace {Path(target).name}")
        replace(source, target)

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(os, "replace", renamed)
    built = shipping.pack(tmp_path / "cache")
    assert events == ["fsync True", f"replace {built.archive.name}",
                      "fsync True", f"replace {built.launcher.name}"], events


def test_the_launcher_run_without_the_environment_says_what_to_do(tmp_path: Path) -> None:
    """spark-submit of a Spark install with the environment not activated runs the
    launcher in a Python without tieredstore: a bare ModuleNotFoundError said nothing
    of the cause."""
    launcher = tmp_path / shipping.LAUNCHER
    launcher.write_text(shipping.LAUNCHER_TEXT)
    done = subprocess.run([sys.executable, "-I", "-S", str(launcher), "stats"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done
    assert "No module named 'tieredstore'" in done.stderr, done.stderr
    assert "spark-submit with the environment that built the pack activated" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
