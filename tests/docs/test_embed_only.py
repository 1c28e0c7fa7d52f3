"""An install without extras (``pip install tieredstore``) embeds the store.

The environment is a new venv (``--without-pip``) whose site directory holds,
through a ``.pth`` file, one directory of symbolic links: the ``tieredstore``
package as it ships (:func:`tieredstore.spark.shipping.package_files`, what
the wheel holds: ``test_wheel.py``) and every installed distribution that the
core requirements of this checkout's ``pyproject.toml`` need, at any depth,
and nothing else (:func:`tieredstore.spark.shipping.closure` with no extras).
Nothing is downloaded. In it the README's embedding example runs as pasted,
every module of the package but the Spark ones imports, and no distribution
of an extra (PySpark, pyarrow, moto, pytest...) can be imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from tests.docs.readme import ROOT, blocks
from tieredstore.spark import shipping

EXTRAS_ONLY = ("pyspark", "pyarrow", "py4j", "moto", "pytest", "hypothesis", "s3fs", "mypy",
               "psutil")
"""Top-level modules of the extras' distributions: none may be importable."""

NOT_CORE = ("tieredstore.spark", "pyspark_tieredstore")
"""What needs the ``spark`` extra to import."""


def core_requirements() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def link_tree(target: Path) -> list[str]:
    """Links in ``target`` to the package's files and its core closure's, each
    with its compiled byte code beside it where this environment has it (so the
    test does not compile botocore again); the closure's names."""
    dists = shipping.closure((), requires=core_requirements())
    tag = sys.implementation.cache_tag
    for path, name in [*shipping.package_files(), *shipping.dist_files(dists)]:
        link = target / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path)
        compiled = path.parent / "__pycache__" / f"{path.stem}.{tag}.pyc"
        if path.suffix == ".py" and compiled.is_file():
            (link.parent / "__pycache__").mkdir(exist_ok=True)
            (link.parent / "__pycache__" / compiled.name).symlink_to(compiled)
    return [shipping.metadata_name(d) for d in dists]


@pytest.fixture(scope="module")
def embed_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a venv that holds the core install only."""
    root = tmp_path_factory.mktemp("embed")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-I", "-c",
                              "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    names = link_tree(root / "site")
    assert {"aioboto3", "boto3", "protobuf", "diskcache", "crc32c"} <= set(names), names
    assert not {"pyspark", "pyarrow", "moto", "pytest"} & set(names), names
    (Path(purelib) / "tieredstore-core.pth").write_text(f"{root / 'site'}\n")
    return python


def run(python: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -I`` (no PYTHONPATH, no user site, not the working directory on
    the path): it sees its venv only."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "TIEREDSTORE_", "VIRTUAL_ENV"))}
    done = subprocess.run([str(python), "-I", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_environment_has_no_extra_and_is_not_this_one(embed_python: Path,
                                                          tmp_path: Path) -> None:
    out = run(embed_python, ["-c", "import importlib.util as u, sys, tieredstore; "
                             f"print([m for m in {EXTRAS_ONLY!r} if u.find_spec(m)]); "
                             "print(sys.prefix); print(tieredstore.__file__)"], tmp_path)
    extras, prefix, package = out.stdout.splitlines()
    assert extras == "[]", f"importable without the extras: {extras}"
    assert Path(prefix) == embed_python.parent.parent
    assert Path(package) == embed_python.parents[2] / "site" / "tieredstore" / "__init__.py"
    assert Path(package).resolve() == ROOT / "tieredstore" / "__init__.py"
    assert sysconfig.get_paths()["purelib"] not in out.stdout


def test_the_readme_embedding_example_runs(embed_python: Path, tmp_path: Path) -> None:
    [embed] = [b for b in blocks() if b.heading == "Embedding the message store"
               and b.language == "python"]
    (tmp_path / "embed.py").write_text(embed.text)
    out = run(embed_python, ["embed.py"], tmp_path)
    assert "b'hello'" in out.stdout, out.stdout
    assert (tmp_path / "data").is_dir()


def test_every_module_but_spark_imports(embed_python: Path, tmp_path: Path) -> None:
    """No module of the core (the CLI and the test kit included) imports an
    extra's distribution when it is imported (``__main__`` modules run a command:
    left out)."""
    script = (
        "import importlib, pkgutil, sys, tieredstore\n"
        "names = [m.name for m in pkgutil.walk_packages(tieredstore.__path__, 'tieredstore.')\n"
        f"         if not m.name.startswith({NOT_CORE!r}) and not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {EXTRAS_ONLY!r})\n"
        "assert not loaded, loaded\n"
        "print(len(names))\n")
    out = run(embed_python, ["-c", script], tmp_path)
    assert int(out.stdout) > 100, out.stdout

