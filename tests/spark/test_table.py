"""The export table's commit protocol on its own (no Spark): what each step leaves
visible, and what the next run makes of it. Files stand in for a run's Parquet."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tieredstore.errors import ConfigError
from tieredstore.spark.table import (
    Commit,
    Table,
    TableBusy,
    TableConflict,
    TableCorrupt,
    TableError,
    new_run_id,
    next_commit,
    table_root,
)

FILES = ("topic=a/date=2023-11-14/part-0.parquet", "topic=b/date=2023-11-15/part-1.parquet")


def visible(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)}


def stage(table: Table, run: str, files: tuple[str, ...] = FILES) -> None:
    for name in files:
        path = table.staging(run) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{run} {name}")


def staged_run(table: Table, last: Commit | None = None) -> Commit:
    run = new_run_id()
    stage(table, run)
    assert table.staged_files(run) == sorted(FILES)
    return next_commit(last, run, "p/c", ranges=(("b0", "a", 0, 0, 5), ("b0", "b", 0, 0, 2)),
                       files=table.staged_files(run), rows=7)


def test_a_run_shows_nothing_before_its_commit_and_all_after(tmp_path: Path) -> None:
    with Table.locked(tmp_path) as table:
        assert table.recover() is None
        commit = staged_run(table)
        assert not visible(tmp_path)
        table.commit(commit)
        table.publish(commit)
        assert visible(tmp_path) == set(FILES)
        assert not table.staging(commit.run).exists()
        assert table.last_commit() == commit
        assert commit.next_offset("b0", "a", 0) == 5 and commit.next_offset("b0", "c", 0) is None
        assert commit.next_offset("b1", "a", 0) is None


def test_the_next_run_rolls_a_committed_run_forward(tmp_path: Path) -> None:
    steps: list[str] = []
    with Table.locked(tmp_path) as table:
        commit = staged_run(table)
        table.commit(commit)
        # the run died after its first move
        (tmp_path / FILES[0]).parent.mkdir(parents=True)
        os.rename(table.staging(commit.run) / FILES[0], tmp_path / FILES[0])
    assert visible(tmp_path) == {FILES[0]}
    with Table.locked(tmp_path, steps.append) as table:
        assert table.recover() == commit
    assert visible(tmp_path) == set(FILES)
    assert steps == [f"moved {FILES[1]}", "published", "recovered"]
    assert (tmp_path / FILES[1]).read_text() == f"{commit.run} {FILES[1]}"


def test_the_next_run_rolls_an_uncommitted_run_back(tmp_path: Path) -> None:
    with Table.locked(tmp_path) as table:
        first = staged_run(table)
        table.commit(first)
        table.publish(first)
        second = staged_run(table, first)  # staged, never committed
        (tmp_path / "_commits" / f".tmp-{second.run}").write_text("{")
    with Table.locked(tmp_path) as table:
        assert table.recover() == first
    assert not os.listdir(tmp_path / "_staging")
    assert os.listdir(tmp_path / "_commits") == [f"{1:020d}.json"]
    assert visible(tmp_path) == set(FILES)


def test_a_commit_whose_reply_was_lost_is_its_own_but_a_rivals_is_refused(
        tmp_path: Path) -> None:
    with Table.locked(tmp_path) as table:
        commit = staged_run(table)
        table.commit(commit)
        table.commit(commit)  # the retry finds its own commit: done
        rival = staged_run(table)  # another run that also read "no commit yet"
        assert rival.sequence == commit.sequence
        with pytest.raises(TableConflict, match="written by another run"):
            table.commit(rival)
        table.abandon(rival.run)
        assert not table.staging(rival.run).exists()
        table.abandon(commit.run)  # committed: its files are the table's
        assert table.staging(commit.run).exists()
        assert table.last_commit() == commit


def test_one_run_at_a_time(tmp_path: Path) -> None:
    with (Table.locked(tmp_path), pytest.raises(TableBusy, match=f"pid {os.getpid()}"),
          Table.locked(tmp_path)):
        pass
    with Table.locked(tmp_path):
        pass  # let go of when the first run ended


def test_damage_is_named_not_papered_over(tmp_path: Path) -> None:
    with Table.locked(tmp_path) as table:
        commit = staged_run(table)
        table.commit(commit)
        (table.staging(commit.run) / FILES[1]).unlink()
        with pytest.raises(TableCorrupt, match=f"{FILES[1]}.*neither staged nor in the table"):
            table.recover()
        (tmp_path / "_commits" / f"{2:020d}.json").write_text("{not json")
        with pytest.raises(TableCorrupt, match=r"commit 0+2\.json unreadable"):
            table.last_commit()


def test_a_directory_that_is_not_a_table_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with Table.locked(tmp_path) as table, pytest.raises(TableError, match="not an export table"):
        table.recover()
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="not a directory"), Table.locked(tmp_path / "file"):
        pass


def test_the_table_is_a_local_directory(tmp_path: Path) -> None:
    assert table_root((tmp_path / "t").as_uri()) == tmp_path / "t"
    assert table_root("rel") == Path("rel").absolute()
    for url in ("s3a://bucket/t", "hdfs://nn/t", "file://host/t"):
        with pytest.raises(ConfigError, match="output"):
            table_root(url)


class Killed(BaseException):
    """The process dying at a filesystem call (nothing after it runs)."""


FS_CALLS = ("link", "rename", "unlink", "rmdir", "mkdir", "fsync")
MORE = ("topic=a/date=2023-11-14/part-2.parquet", "topic=c/date=2023-11-16/part-3.parquet")


def test_a_run_killed_at_any_filesystem_call_then_recovery_killed_at_any_shows_each_file_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every crash point of a run (its recovery, commit and moves), and of the next
    run's recovery: the run after that shows the table with or without the
    killed run's files, all of them or none, and no staging."""
    calls = {"left": -1}
    for name in FS_CALLS:
        real = getattr(os, name)

        def call(*args: object, _real: Any = real, **kwargs: object) -> object:
            if calls["left"] == 0:
                raise Killed
            calls["left"] -= 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(os, name, call)

    def run(root: Path, files: tuple[str, ...]) -> None:
        with Table.locked(root) as table:
            last = table.recover()
            run_id = new_run_id()
            stage(table, run_id, files)
            commit = next_commit(last, run_id, "s", ranges=(("b0", "a", 0, 0, 1),),
                                 files=table.staged_files(run_id), rows=len(files))
            table.commit(commit)
            table.publish(commit)

    def recover(root: Path) -> None:
        with Table.locked(root) as table:
            table.recover()

    def killed(after: int, work: Callable[..., None], root: Path, *args: Any) -> bool:
        calls["left"] = after
        try:
            work(root, *args)
        except Killed:
            return True
        finally:
            calls["left"] = -1
        return False

    for run_calls in itertools.count():
        for recovery_calls in range(40):
            root = tmp_path / f"{run_calls}-{recovery_calls}"
            run(root, FILES)
            run_killed = killed(run_calls, run, root, MORE)
            recovery_killed = killed(recovery_calls, recover, root)
            with Table.locked(root) as table:
                last = table.recover()
            assert last is not None
            want = set(FILES) | (set(MORE) if last.sequence == 2 else set())
            where = f"run killed after {run_calls} calls, recovery after {recovery_calls}"
            assert visible(root) == want, where
            assert not os.listdir(root / "_staging"), where
            assert [p.name for p in (root / "_commits").iterdir()
                    if p.name.startswith(".")] == [], where
            if not recovery_killed:
                break
        if not run_killed:
            break
    assert run_calls > 10


def test_a_commit_is_linked_only_once_its_files_are_durable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A power cut keeps what was fsynced: the commit must not outlive its files
    (Spark does not fsync them; a commit naming empty files would be a loss the
    next run does not redo), nor a moved file the directories that name it."""
    synced: list[str] = []
    real_fsync, real_link = os.fsync, os.link

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def link(src: Any, dst: Any, **kwargs: Any) -> None:
        synced.append(f"link {dst}")
        real_link(src, dst, **kwargs)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    with Table.locked(tmp_path) as table:
        commit = staged_run(table)
        table.commit(commit)
        linked = next(i for i, s in enumerate(synced) if s.startswith("link "))
        before = set(synced[:linked])
        staging = table.staging(commit.run)
        for name in FILES:
            assert str(staging / name) in before, name
            for parent in (staging / name).parents:
                assert str(parent) in before, parent
                if parent == tmp_path:
                    break
        table.publish(commit)
        after = set(synced[linked:])
        for name in FILES:
            for parent in (tmp_path / name).parents:
                assert str(parent) in after, parent
                if parent == tmp_path:
                    break


def test_a_table_of_one_brokers_format_is_refused_naming_what_to_do(tmp_path: Path) -> None:
    """Format 1 kept one broker's offsets in a topic=/date= layout: continuing it
    would mix layouts, so the table is refused and a new one asked for."""
    (tmp_path / "_commits").mkdir()
    (tmp_path / "_commits" / f"{1:020d}.json").write_text(json.dumps({
        "version": 1, "sequence": 1, "run": "r", "source": "local:/s/p/c/b", "created": "",
        "rows": 1, "offsets": {"a": {"0": 1}}, "ranges": [["a", 0, 0, 1]], "files": []}))
    with Table.locked(tmp_path) as table, pytest.raises(
            TableError, match=r"format 1.*keyed by broker; export into a new table"):
        table.recover()
