"""Every code block of the README and of docs/*.md runs as a reader pastes it.

Each block runs in a new empty directory of its own (its working directory),
with the code of this checkout on ``PYTHONPATH``, a ``tieredstore`` command on
``PATH`` that runs this checkout's CLI, no ``TIEREDSTORE_*`` variable set and
``XDG_CACHE_HOME`` inside the directory; a block gets what it needs from there,
never by an edit of its text. By language:

- ``python``: the block, as a file, run by this interpreter. What it imports
  from a package of the reader's own (``my_package``) is given as a module in
  its directory.
- ``sh``/``bash``/``console``/``shell``: the block's commands (a line ending in
  ``\\`` goes on), run in order by ``bash -e``, except ``make ...`` (it builds
  the project's own environment), ``spark-submit ...`` (it needs a Spark
  install and a cluster) and ``pip install ...`` (it installs from the
  network): those are left out, the rest of the block runs.
- ``toml``: loaded with ``load_config`` (a configuration example must load).
- ``json``: parsed (a JSON example must be JSON).

A ``text`` block is a layout (keys, bytes), not code, and is not run. A block
of another language, or none, fails the test unless marked with the reason it
is not run (``<!-- not run: why -->`` on the line before its fence; see
:mod:`tests.docs.readme`): a block the test cannot run is never skipped
silently. Inline commands in the prose (``tieredstore spark export --data-dir DIR
...``) are synopses with placeholders, not examples: only fenced blocks run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docs.readme import DOCS, README, ROOT, Block, all_blocks, blocks
from tieredstore.cli import COMMANDS
from tieredstore.config import load_config

TIMEOUT = 60
EXEMPT = re.compile(r"^(make|spark-submit|pip install|python[0-9.]* -m pip install)\b")
"""Shell commands left out of a block's run (see the module's docstring)."""

MY_PACKAGE = '''\
"""The reader's own backend, as the test-kit example imports it."""
from tieredstore.objectstore import LocalObjectStore
from tieredstore.segment import DirectReader as MyReader


class MyObjectStore(LocalObjectStore):
    def __init__(self, root):
        super().__init__(root, fsync=False)
'''


def environment(directory: Path) -> dict[str, str]:
    """What a block runs with: this checkout's code and CLI, no TIEREDSTORE_* setting."""
    shims = directory / ".bin"
    shims.mkdir(exist_ok=True)
    command = shims / "tieredstore"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tieredstore.cli "$@"\n')
    command.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIEREDSTORE_")}
    env.update(PYTHONPATH=str(ROOT), PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}",
               XDG_CACHE_HOME=str(directory / ".cache"))
    return env


def _check(done: subprocess.CompletedProcess[str], block: Block, what: str) -> None:
    assert done.returncode == 0, (
        f"{block.name} under {block.heading!r} failed ({what}, exit {done.returncode}):\n"
        f"{block.text}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")


def run_python(block: Block, directory: Path) -> None:
    (directory / "my_package.py").write_text(MY_PACKAGE)
    (directory / "block.py").write_text(block.text)
    _check(subprocess.run([sys.executable, "block.py"], cwd=directory,
                          env=environment(directory), capture_output=True, text=True,
                          timeout=TIMEOUT, check=False), block, "python block.py")


def shell_commands(text: str) -> list[str]:
    """The block's commands (continued lines joined), the exempt ones left out."""
    commands: list[str] = []
    current = ""
    for line in text.splitlines():
        current += line
        if line.rstrip().endswith("\\"):
            current = current.rstrip()[:-1] + " "
            continue
        command = current.strip().removeprefix("$ ")
        current = ""
        if command and not command.startswith("#") and not EXEMPT.match(command):
            commands.append(command)
    return commands


def run_shell(block: Block, directory: Path) -> None:
    script = "\n".join(shell_commands(block.text))
    _check(subprocess.run(["bash", "-e", "-c", script], cwd=directory,
                          env=environment(directory), capture_output=True, text=True,
                          timeout=TIMEOUT, check=False), block, f"bash -e -c {script!r}")


def run_toml(block: Block, directory: Path) -> None:
    path = directory / "block.toml"
    path.write_text(block.text)
    load_config(path, env={})


def run_json(block: Block, directory: Path) -> None:
    try:
        json.loads(block.text)
    except ValueError as exc:
        pytest.fail(f"{block.name} under {block.heading!r} is not JSON: {exc}")


RUNNERS: dict[str, Callable[[Block, Path], None]] = {
    "python": run_python, "sh": run_shell, "bash": run_shell, "console": run_shell,
    "shell": run_shell, "toml": run_toml, "json": run_json,
}


def run_block(block: Block, directory: Path) -> None:
    """Run ``block`` in ``directory``; fails for a block it cannot run."""
    runner = RUNNERS.get(block.language)
    if runner is None:
        pytest.fail(f"{block.name} under {block.heading!r}: the test cannot run a block "
                    f"of this language; make it one it runs ({', '.join(sorted(RUNNERS))}) "
                    "or mark it with <!-- not run: why --> on the line before its fence")
    runner(block, directory)


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.is_code],
                         ids=lambda b: f"{b.source}:{b.line}-{b.language or 'none'}")
def test_the_block_runs_as_pasted(block: Block, tmp_path: Path) -> None:
    if block.not_run is not None:
        pytest.skip(f"marked not run: {block.not_run}")
    run_block(block, tmp_path)


def test_every_document_is_read() -> None:
    """The docs' blocks are found (the README's and every docs/*.md's), and a
    layout block is plain text, never code left unfenced."""
    found = all_blocks()
    sources = {b.source for b in found}
    assert {"README.md", "docs/embedding.md", "docs/log-objects.md"} <= sources, sources
    assert all(b.language for b in found), [b.name for b in found if not b.language]


def test_the_readme_embedding_example_uses_only_what_an_install_has() -> None:
    """Not a file of this checkout that a wheel lacks (conf/, the working directory's)."""
    [embed] = [b for b in blocks() if b.heading == "Embedding the message store"
               and b.language == "python"]
    [async_embed] = [b for b in blocks(DOCS / "embedding.md") if b.heading == "In an async host"
                     and b.language == "python"]
    for block in (embed, async_embed):
        assert "conf/" not in block.text and ".toml" not in block.text.split("#")[0], block.text
    # the async host's example enters open as the sync one does (run by the test above)
    assert async_embed.not_run is None
    assert "async with AsyncMessageStore.open(config) as store:" in async_embed.text


def test_a_block_it_cannot_run_or_that_fails_fails_the_test(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(textwrap.dedent("""\
        # t
        ```ruby
        puts 1
        ```
        <!-- not run: an example of output -->

        ```ruby
        puts 1
        ```
        ```python
        raise SystemExit(3)
        ```
        ```sh
        make demo   # exempt
        tieredstore no-such-command
        ```
        ```sh
        make demo
        spark-submit --master spark://h:7077 \\
          job.py
        tieredstore --help
        ```
        """))
    unmarked, marked, failing, failing_cli, passing = blocks(readme)
    assert marked.not_run == "an example of output" and unmarked.not_run is None
    for block in (unmarked, failing, failing_cli):
        with pytest.raises((pytest.fail.Exception, AssertionError)):
            run_block(block, tmp_path)
    assert shell_commands(passing.text) == ["tieredstore --help"]
    run_block(passing, tmp_path)
    readme.write_text("```text\nkey/{n}\n```\n```json\n{\"a\": 1\n```\n")
    layout, broken_json = blocks(readme)
    assert not layout.is_code and broken_json.is_code
    with pytest.raises(pytest.fail.Exception, match="not JSON"):
        run_block(broken_json, tmp_path)
    readme.write_text("<!-- not run: nothing follows -->\ntext\n")
    with pytest.raises(ValueError, match="no block follows"):
        blocks(readme)


def test_the_readme_lists_every_command() -> None:
    """The command line's list: every command the parser has (bench in the prose
    beside it: it runs in a source checkout only)."""
    text = README.read_text()
    match = re.search(r"^`tieredstore (demo \| [a-z |]+)`", text, re.M)
    assert match is not None, "no `tieredstore demo | ...` line in the README"
    listed = [name.strip() for name in match.group(1).split("|")]
    assert sorted(listed) == sorted(set(COMMANDS) - {"bench"}), listed
    assert "`tieredstore bench` in a source checkout" in text


def test_the_readme_layout_lists_every_package() -> None:
    """The layout table has a row for each package of tieredstore/ (a directory
    with an ``__init__.py``), and no row for one that is gone."""
    text = README.read_text()
    rows = set(re.findall(r"^\| `tieredstore/([a-z_]+)` \|", text, re.M))
    packages = {p.parent.name for p in (ROOT / "tieredstore").glob("*/__init__.py")}
    assert rows == packages, (sorted(packages - rows), sorted(rows - packages))
