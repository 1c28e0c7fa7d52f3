"""The commit protocol of an export table: a Parquet directory that runs append to.

A table is a local directory (or ``file://`` URI) in Hive layout,
``broker=B/topic=T/date=D/part-....parquet``, that Spark reads natively. Beside the
data, in names starting with ``_`` that Spark's file listing skips:

- ``_export.lock``: held (``flock``, exclusive, not blocking) by the one run
  that works on the table; the kernel lets go of it when its process dies;
- ``_staging/<run>/``: where a run's Spark job writes its files, hidden;
- ``_commits/<n>.json`` (``n`` zero-padded, from 1): the runs that count, in
  order, each created once and whole (a temporary file linked to its name, so
  an existing commit is never replaced), each with every queue's next offset
  to export (cumulative, by broker, topic and queue id) and the run's files.

The rule: a run's rows count once its commit exists, and only then. Its files
move from staging into their partitions after the commit (each an atomic
rename); a run that finds the newest commit's staging directory still there
finishes its moves first (roll forward), and deletes every other staging
directory (roll back: no commit names them). So the table never shows a row
of an uncommitted run, and shows a committed run's rows once each: all of
them once its moves are done. docs/format.md, "Export tables", says what is
visible after a crash at each step.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from tieredstore.errors import ConfigError, Corrupt, TieredStoreError

LOCK_NAME = "_export.lock"
COMMITS_DIR = "_commits"
STAGING_DIR = "_staging"
FORMAT_VERSION = 2
# Format 1 kept one broker's offsets (topic -> queue -> next) in a topic=/date= layout.
ONE_BROKER_VERSION = 1
_COMMIT_NAME = re.compile(r"^(\d{20})\.json$")

# Called with the name of each step as it completes: "recovered", "bounded" (the
# queues' end offsets taken), "staged", "committed", "moved <file>", "published"
# (progress, and the points tests crash at).
StepHook = Callable[[str], None]


class TableError(TieredStoreError):
    """An export table cannot be worked on; ``table`` names its directory."""

    def __init__(self, table: Path, message: str) -> None:
        super().__init__(f"export table {table}: {message}")
        self.table = table


class TableBusy(TableError):
    """Another run holds the table's lock."""


class TableConflict(TableError):
    """Another writer committed the sequence number this run meant to commit."""


class TableCorrupt(TableError, Corrupt):
    """The table's commits or files do not agree (a commit unreadable, a committed
    file neither staged nor in its partition)."""


@dataclass(frozen=True, slots=True)
class Commit:
    """One committed run. ``offsets``: broker -> topic -> queue id -> the next
    offset to export, for every queue exported so far; ``files``: the run's
    files, relative to the table; ``source``: which cluster's queues the offsets
    are of."""

    sequence: int
    run: str
    source: str
    offsets: Mapping[str, Mapping[str, Mapping[int, int]]]
    files: tuple[str, ...] = ()
    rows: int = 0
    # broker, topic, queue, from, to (exclusive)
    ranges: tuple[tuple[str, str, int, int, int], ...] = ()
    created: str = ""

    def next_offset(self, broker: str, topic: str, queue_id: int) -> int | None:
        return self.offsets.get(broker, {}).get(topic, {}).get(queue_id)

    def to_json(self) -> str:
        return json.dumps({
            "version": FORMAT_VERSION, "sequence": self.sequence, "run": self.run,
            "source": self.source, "created": self.created, "rows": self.rows,
            "offsets": {b: {t: {str(q): n for q, n in sorted(qs.items())}
                            for t, qs in sorted(ts.items())}
                        for b, ts in sorted(self.offsets.items())},
            "ranges": [list(r) for r in self.ranges], "files": list(self.files),
        }, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Commit:
        raw = json.loads(text)
        if raw.get("version") != FORMAT_VERSION:
            raise ValueError(f"version {raw.get('version')!r}, expected {FORMAT_VERSION}")
        return cls(int(raw["sequence"]), str(raw["run"]), str(raw["source"]),
                   {str(b): {str(t): {int(q): int(n) for q, n in qs.items()}
                             for t, qs in ts.items()}
                    for b, ts in raw["offsets"].items()},
                   tuple(str(f) for f in raw["files"]), int(raw["rows"]),
                   tuple((str(b), str(t), int(q), int(a), int(c))
                         for b, t, q, a, c in raw["ranges"]),
                   str(raw["created"]))


def table_root(output: str) -> Path:
    """The table directory ``output`` names, absolute: a local path or a ``file://``
    URI; any other scheme is refused (the commit protocol needs a local
    filesystem's atomic rename, link and lock)."""
    parsed = urlparse(output)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ConfigError("output", f"{output!r}: a file:// URI with a host is not a "
                              "local path")
        return Path(unquote(parsed.path)).absolute()
    if parsed.scheme and len(parsed.scheme) > 1:  # not a Windows drive letter
        raise ConfigError("output", f"{output!r}: the export table must be a local directory "
                          f"or file:// URI, not {parsed.scheme}:// (its commit protocol needs "
                          "a local filesystem's atomic rename, link and lock)")
    if not output:
        raise ConfigError("output", "must name a directory")
    return Path(output).expanduser().absolute()


@dataclass(slots=True)
class Table:
    """An export table, locked by this process (:meth:`locked`)."""

    root: Path
    on_step: StepHook = field(default=lambda step: None)

    @classmethod
    @contextlib.contextmanager
    def locked(cls, root: Path, on_step: StepHook | None = None) -> Iterator[Table]:
        """The table at ``root`` (created if missing), its lock held until the
        block ends; :class:`TableBusy` at once if another run holds it."""
        if root.exists() and not root.is_dir():
            raise ConfigError("output", f"{root} is not a directory")
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "unknown"
                raise TableBusy(root, f"another export is running on it ({holder}); "
                                "wait for it to end") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                      f"{_now()}\n".encode(), 0)
            yield cls(root, on_step or (lambda step: None))
        finally:
            os.close(fd)  # lets go of the lock

    # --- reading ---------------------------------------------------------------

    def last_commit(self) -> Commit | None:
        """The newest commit, or None before the first."""
        found = self._commit_numbers()
        return self._read_commit(found[-1]) if found else None

    def _commit_numbers(self) -> list[int]:
        where = self.root / COMMITS_DIR
        if not where.is_dir():
            return []
        return sorted(int(m.group(1)) for m in map(_COMMIT_NAME.match, os.listdir(where)) if m)

    def _read_commit(self, sequence: int) -> Commit:
        path = self._commit_path(sequence)
        try:
            text = path.read_text()
            if json.loads(text).get("version") == ONE_BROKER_VERSION:
                raise TableError(self.root, f"commit {path.name} is of format "
                                 f"{ONE_BROKER_VERSION}: one broker's offsets in a topic=/date= "
                                 "layout, before tables were keyed by broker; export into a "
                                 "new table (spark.read.parquet still reads this one)")
            commit = Commit.from_json(text)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TableCorrupt(self.root, f"commit {path.name} unreadable: {exc}") from None
        if commit.sequence != sequence:
            raise TableCorrupt(self.root, f"commit {path.name} says sequence "
                               f"{commit.sequence}")
        return commit

    def _commit_path(self, sequence: int) -> Path:
        return self.root / COMMITS_DIR / f"{sequence:020d}.json"

    def staging(self, run: str) -> Path:
        """Where run ``run`` stages its files (hidden from Spark's listing)."""
        return self.root / STAGING_DIR / run

    # --- the protocol ------------------------------------------------------------

    def recover(self) -> Commit | None:
        """Finish what a crashed run left: the newest commit's moves (roll forward),
        then delete every staging directory and temporary commit file (roll back:
        no commit names them). The newest commit, after."""
        last = self.last_commit()
        strangers = sorted(set(os.listdir(self.root)) - {LOCK_NAME, COMMITS_DIR, STAGING_DIR})
        if last is None and strangers:
            raise TableError(self.root, f"it holds {strangers[0]!r} but no commit: not an "
                             "export table (or its _commits was deleted); export to a new "
                             "directory")
        if last is not None and self.staging(last.run).is_dir():
            self.publish(last)
        staging = self.root / STAGING_DIR
        if staging.is_dir():
            for run in os.listdir(staging):
                shutil.rmtree(staging / run)
        commits = self.root / COMMITS_DIR
        if commits.is_dir():
            for name in os.listdir(commits):
                if name.startswith(".tmp-"):
                    (commits / name).unlink()
        self.on_step("recovered")
        return last

    def abandon(self, run: str) -> None:
        """Delete run ``run``'s staging, unless a commit names it (a failure after the
        commit landed: its files are the table's now, the next run moves them)."""
        try:
            last = self.last_commit()
        except TableError:
            return  # the next run's recovery decides
        if last is None or last.run != run:
            shutil.rmtree(self.staging(run), ignore_errors=True)

    def staged_files(self, run: str) -> list[str]:
        """Run ``run``'s Parquet files in staging, relative to its staging directory."""
        base = self.staging(run)
        return sorted(str(p.relative_to(base)) for p in base.rglob("*.parquet")
                      if not any(part.startswith(("_", ".")) for part in
                                 p.relative_to(base).parts))

    def commit(self, commit: Commit) -> None:
        """Create commit ``commit.sequence``, whole or not at all: a temporary file,
        flushed, linked to the commit's name (which fails if the name exists: the
        commit of another writer, or this one's own whose reply was lost, told
        apart by the run id). Then the run counts. Before the link, the run's files
        and the directories naming them are made durable (Spark does not fsync
        what it writes): a power cut keeps no commit whose files it lost."""
        staging = self.staging(commit.run)
        for name in commit.files:
            _fsync(staging / name)
        self._fsync_dirs(staging, commit.files)
        commits = self.root / COMMITS_DIR
        commits.mkdir(exist_ok=True)
        _fsync(self.root)
        tmp = commits / f".tmp-{commit.run}"
        with open(tmp, "w") as out:
            out.write(commit.to_json())
            out.flush()
            os.fsync(out.fileno())
        final = self._commit_path(commit.sequence)
        try:
            os.link(tmp, final)
        except FileExistsError:
            if self._read_commit(commit.sequence).run != commit.run:
                raise TableConflict(self.root, f"commit {final.name} was written by another "
                                    "run meanwhile; this run's files stay hidden") from None
        finally:
            tmp.unlink(missing_ok=True)
        _fsync(commits)
        self.on_step("committed")

    def publish(self, commit: Commit) -> None:
        """Move the committed run's files into their partitions (those not moved
        yet: a crashed run's are finished), then drop its staging."""
        staging = self.staging(commit.run)
        for name in commit.files:
            target, staged = self.root / name, staging / name
            if target.exists():
                continue  # moved before a crash
            if not staged.exists():
                raise TableCorrupt(self.root, f"committed file {name} (commit "
                                   f"{commit.sequence}) is neither staged nor in the table")
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staged, target)
            self.on_step(f"moved {name}")
        self._fsync_dirs(self.root, commit.files)  # the moves, before staging goes
        shutil.rmtree(staging)
        self.on_step("published")

    def _fsync_dirs(self, base: Path, names: Sequence[str]) -> None:
        """fsync every directory from ``base / name``'s parent up to the table's
        root, each once, deepest first."""
        dirs: set[Path] = set()
        for name in names:
            at = (base / name).parent
            while at not in dirs and at != self.root.parent:
                dirs.add(at)
                if at == self.root:
                    break
                at = at.parent
        for path in sorted(dirs, key=lambda p: -len(p.parts)):
            _fsync(path)


def next_commit(last: Commit | None, run: str, source: str, *,
                ranges: Sequence[tuple[str, str, int, int, int]], files: Sequence[str],
                rows: int) -> Commit:
    """The commit after ``last`` for a run that exported ``ranges``."""
    offsets = {b: {t: dict(qs) for t, qs in ts.items()}
               for b, ts in (last.offsets if last else {}).items()}
    for broker, topic, queue_id, _, end in ranges:
        offsets.setdefault(broker, {}).setdefault(topic, {})[queue_id] = end
    return Commit((last.sequence if last else 0) + 1, run, source, offsets, tuple(files),
                  rows, tuple(ranges), _now())


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.urandom(6).hex()}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _fsync(path: Path) -> None:
    """fsync a file or a directory (a directory's where the filesystem allows)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems refuse a directory fsync
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)
