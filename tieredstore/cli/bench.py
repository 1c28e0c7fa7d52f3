"""``tieredstore bench [ARGS...]``: run the benchmark suite (``python -m bench ARGS``).

The suite lives in the repository's ``bench`` package, beside ``tieredstore``;
it is not installed with the library: elsewhere the command is not listed,
and says it needs a source checkout (exit 2). Arguments after ``bench`` go to it
unchanged (``tieredstore bench --quick --only write``; ``--help`` shows its
own options when given after ``--``). The suite starts its own servers and
stores: the store options (``--config``, ``--data-dir``, ``--bucket`` ...) do
not apply to it and are refused. It writes a Markdown report (its
``--output``); with ``--json`` its own output goes to stderr and stdout gets
``{"command": [...], "directory", "exit_status"}``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import tieredstore

from .common import CliError, print_json, store_flags_given


def find_suite() -> Path | None:
    """The directory holding ``bench/__main__.py``: the working directory, or the
    checkout ``tieredstore`` was imported from."""
    for root in (Path.cwd(), Path(tieredstore.__file__).resolve().parent.parent):
        if (root / "bench" / "__main__.py").is_file():
            return root
    return None


HELP = "run the benchmark suite (python -m bench); other arguments go to it"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.set_defaults(passthrough=True)


def run(args: argparse.Namespace) -> int:
    given = store_flags_given(args)
    if given:
        raise CliError(f"bench starts its own stores: {' '.join(given)} does not apply")
    extra = list(getattr(args, "extra", []))
    if extra[:1] == ["--"]:
        extra = extra[1:]
    root = find_suite()
    if root is None:
        raise CliError("bench needs a source checkout: the benchmark suite (the repository's "
                       "bench/ package) is not installed with tieredstore; in a checkout, "
                       "with the dev extras (pip install -e '.[dev]'), run `tieredstore "
                       "bench`, `python -m bench` or `make bench`")
    command = [sys.executable, "-m", "bench", *extra]
    print(f"running {' '.join(command[1:])} in {root}", file=sys.stderr)
    status = subprocess.run(command, cwd=root, check=False,
                            stdout=2 if args.json else None).returncode  # fd 2: stderr
    if args.json:
        print_json({"command": command[1:], "directory": str(root), "exit_status": status})
    return status
