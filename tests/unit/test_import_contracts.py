"""The layer contracts in pyproject.toml break on a deliberate violation.

Each case copies the package into a scratch directory, adds one import the
contract forbids, and runs ``lint-imports`` over the copy: the contract named
must be reported broken. The unchanged copy keeps every contract.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="lint-imports not installed")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contracts")
    shutil.copytree(ROOT / "tieredstore", root / "tieredstore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_package_as_it_is_keeps_every_contract(tree: Path) -> None:
    result = _lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


VIOLATIONS = [
    # (contract name, module that imports, the forbidden import)
    ("Layers: imports point down only", "segment/path.py", "import tieredstore.store"),
    ("Layers: imports point down only", "tasks.py", "import tieredstore.objectstore"),
    ("The test kit uses the lower layers only", "testing/faults.py", "import tieredstore.config"),
    ("The library does not import its test kit", "store/formats/keys.py",
     "import tieredstore.testing"),
    ("The store's rooms: api, ops, write, read, base, formats, imports pointing down",
     "store/write/queue.py", "import tieredstore.store.ops.verify"),
    ("The store's rooms: api, ops, write, read, base, formats, imports pointing down",
     "store/read/scan.py", "import tieredstore.store.write.flatfile"),
    ("Nothing below store imports tieredstore.config", "log/options.py",
     "import tieredstore.config"),
    ("cli uses each package through its public names only", "cli/store/query.py",
     "import tieredstore.store.formats.keys"),
    ("cli imports nothing below the store", "cli/store/query.py", "import tieredstore.segment"),
    ("cli imports nothing below the store", "cli/store/query.py", "import tieredstore.objectstore"),
    ("spark uses only the public names of the store, ledger, config and errors",
     "spark/session.py", "import tieredstore.segment"),
    ("spark uses only the public names of the store, ledger, config and errors",
     "spark/session.py", "import tieredstore.store.formats.keys"),
    ("spark uses only the public names of the store, ledger, config and errors",
     "spark/session.py", "import tieredstore.ledger.block"),
    ("The local ledger store's rooms: store, writer, reader, recovery, files",
     "ledger/local/files.py", "import tieredstore.ledger.local.store"),
    ("The upload pool's rooms: pool, committer, shared", "segment/pool/shared.py",
     "import tieredstore.segment.pool.committer"),
    ("Spark's rooms: session, shipping | jobs, read, options", "spark/read/stream.py",
     "import tieredstore.spark.jobs.continuous"),
    ("The command line's rooms: spark | ledger | bench, store, common", "cli/store/verify.py",
     "import tieredstore.cli.spark.jobs"),
    ("The object store port imports no backend (only the factory does)", "objectstore/base.py",
     "import tieredstore.objectstore.backends.local"),
    ("The ledger's rooms: compose | slices, managed, offload | local",
     "ledger/offload/offloader.py", "import tieredstore.ledger.managed"),
    ("A managed ledger's metadata imports no other room of the managed ledgers",
     "ledger/managed/meta/state.py", "import tieredstore.ledger.managed.config"),
]


@pytest.mark.parametrize(("contract", "module", "line"), VIOLATIONS,
                         ids=[f"{m}:{line.split()[-1]}" for _, m, line in VIOLATIONS])
def test_a_forbidden_import_breaks_its_contract(tree: Path, contract: str, module: str,
                                                line: str) -> None:
    path = tree / "tieredstore" / module
    original = path.read_text()
    path.write_text(original + f"\n{line}  # deliberate violation\n")
    try:
        result = _lint(tree)
    finally:
        path.write_text(original)
    assert result.returncode != 0, result.stdout
    assert f"{contract} BROKEN" in result.stdout, result.stdout
