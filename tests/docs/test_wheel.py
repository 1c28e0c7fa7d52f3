"""The wheel holds what an install needs: the package as the Spark pack ships it,
the license, and the reference configuration that errors name by its path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.docs.readme import ROOT
from tieredstore.spark import shipping


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's wheel, built (``pip wheel --no-deps --no-build-isolation``,
    nothing downloaded) from a copy of what goes in it."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE",
                 *(p.name for p in ROOT.glob("pyspark_tieredstore*.py"))):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "tieredstore", source / "tieredstore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-cache-dir", "-q", "-w", str(out),
                           str(source)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    [built] = out.glob("tieredstore-*.whl")
    return built


def test_the_wheel_ships_the_license_and_the_package_as_the_pack_does(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [info] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(info).decode()
    license_files = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert license_files, sorted(n for n in names if ".dist-info/" in n)
    assert "License-Expression: Apache-2.0" in metadata
    assert "tieredstore/config/tieredstore.toml" in names
    packed = {name for _, name in shipping.package_files()}
    assert packed <= names, f"packed for Spark, not in the wheel: {sorted(packed - names)}"
    code = {n for n in names if n.endswith((".py", ".toml")) and ".dist-info/" not in n}
    assert code <= packed, f"in the wheel, not packed for Spark: {sorted(code - packed)}"


def test_an_unknown_key_names_the_reference_file_of_the_install(wheel: Path,
                                                                tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIEREDSTORE_")}
    env["PYTHONPATH"] = str(site)  # the unpacked wheel, before this checkout
    done = subprocess.run([sys.executable, "-c", (
        "from tieredstore import load_config, TieredStoreError\n"
        "try:\n    load_config(env={}, no_such_setting_anywhere=1)\n"
        "except TieredStoreError as exc:\n    print(exc)\n")], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "lists every key" in done.stdout, done.stdout
    where = Path(done.stdout.split(" lists every key")[0].split("unknown key; ")[-1])
    assert where == site / "tieredstore" / "config" / "tieredstore.toml", done.stdout
    assert where.is_file()


def test_bench_is_not_offered_where_its_suite_is_not_installed(wheel: Path,
                                                               tmp_path: Path) -> None:
    """The benchmark suite (bench/) is not in the wheel: an install's help does not
    list ``bench``, and ``tieredstore bench`` says it needs a source checkout."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    assert not (site / "bench").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIEREDSTORE_")}
    env["PYTHONPATH"] = str(site)  # the unpacked wheel, not this checkout

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tieredstore.cli", *argv], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=60,
                              check=False)

    helped = cli("--help")
    assert helped.returncode == 0, helped.stderr
    listed = [line.split()[0] for line in helped.stdout.splitlines()
              if line.startswith("    ") and not line.startswith("     ")]
    assert "metrics" in listed and "bench" not in listed, helped.stdout
    ran = cli("bench", "--tiny")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr.startswith("tieredstore: bench needs a source checkout"), ran.stderr
