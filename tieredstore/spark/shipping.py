"""Shipping tieredstore to Spark workers that have neither it nor its dependencies.

A fresh cluster node has a Python and Spark, nothing more. Spark gives each
executor the archives named in ``spark.archives`` (``path#alias``), unpacked
as ``alias`` in the executor's working directory, and starts its Python
workers with ``spark.executorEnv.PYTHONPATH`` merged into their path. So the
environment is one archive, a plain directory tree of importable packages
(no interpreter, no pyspark: the worker's own Python and Spark run it):

- the ``tieredstore`` package that this process imports (an editable
  checkout included) and the ``pyspark_tieredstore*`` modules beside it;
- every installed distribution in the closure of tieredstore's runtime
  requirements and of its ``spark`` extra (pyarrow, which PySpark's workers
  need to read a Python data source), minus ``pyspark`` and ``py4j``, which
  Spark puts on every worker's path itself; each distribution's files as its
  ``RECORD`` lists them, its ``dist-info`` included.

The workers' Python is ``python3.X``, X being this interpreter's minor
version, found on each worker's ``PATH``: compiled extensions (pyarrow, crc32c,
zstandard...) are built for one minor version and platform, so the pack only
works on workers of this machine's platform (``sysconfig.get_platform()``),
and PySpark itself refuses a worker whose minor version differs from the
driver's (``PYTHON_VERSION_MISMATCH``).

The archive is cached under a name made of a hash of what goes in it (Python
tag, platform, each distribution's name and version and the name, size and
modification time of each of its shipped files, and the bytes of every shipped
tieredstore file), so a pack is built once per environment and source:
``tieredstore-env-<hash>.tar.gz`` in the cache directory (default
``$XDG_CACHE_HOME/tieredstore/spark``, else ``~/.cache/tieredstore/spark``).
It is written to a temporary name and renamed into place (see
``docs/spark-shipping.md``), so a reader never sees half an archive.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from tieredstore.errors import TieredStoreError

ALIAS = "tieredstore-env"
"""The directory name executors unpack the pack as, and put on their path."""

PROVIDED = frozenset({"pyspark", "py4j"})
"""Distributions every Spark worker has on its path already."""

SHIPPED_SUFFIXES = (".py", ".proto", ".typed", ".toml")
"""Files of the tieredstore package that run (or are read) at run time."""

COMPRESSLEVEL = 1
"""gzip level: 1 packs ~235 MB into ~90 MB in ~5 s; 6 saves 10% for twice the time."""

LAUNCHER = "tieredstore_job.py"
LAUNCHER_TEXT = ('"""spark-submit entry point: the tieredstore jobs (tieredstore spark ...)."""\n'
                 "import sys\n\ntry:\n    from tieredstore.cli import main\n"
                 "except ImportError as exc:\n"
                 '    sys.exit(f"{sys.executable}: {exc}: the driver runs spark.pyspark.python "\n'
                 '             "from PATH: run spark-submit with the environment that built "\n'
                 '             "the pack activated")\n\n'
                 'sys.exit(main(["spark", *sys.argv[1:]]))\n')
"""The launcher: a driver whose Python lacks tieredstore (spark-submit of a Spark
install, the environment not activated) is told what to do."""

_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


class PackError(TieredStoreError, RuntimeError):
    """This environment cannot be packed for Spark's workers (the message says why)."""


@dataclass(frozen=True, slots=True)
class Pack:
    """A built pack: the archive, the launcher script beside it, and the name of
    the Python the workers run it with."""

    archive: Path
    launcher: Path
    python: str

    def conf(self) -> dict[str, str]:
        """The Spark settings that ship it (merge into others with :func:`merge_conf`)."""
        return {"spark.archives": f"{spark_path(self.archive)}#{ALIAS}",
                "spark.executorEnv.PYTHONPATH": ALIAS,
                "spark.pyspark.python": self.python}

    def submit_line(self, master: str) -> str:
        """The ``spark-submit`` command line that runs the jobs on ``master`` with
        this pack (append the job and its options, or put your own script in place
        of the launcher)."""
        words = ["spark-submit", "--master", master]
        for key, value in self.conf().items():
            words += ["--archives", value] if key == "spark.archives" \
                else ["--conf", f"{key}={value}"]
        return shlex.join([*words, str(self.launcher)])


def spark_path(path: Path) -> str:
    """``path`` as Spark's file lists (``spark.archives``) take it: as it is, or a
    ``file:`` URI if it holds a character that URIs escape (a space, ``#``, ``%``,
    ``,``...), which Spark would otherwise take for part of the file's name (or,
    ``,``, for two files)."""
    text = str(path)
    return text if quote(text) == text else path.as_uri()


def worker_python() -> str:
    """The name of the Python the workers run: this interpreter's minor version."""
    return f"python{sys.version_info.major}.{sys.version_info.minor}"


def default_cache_dir() -> Path:
    """Where packs are kept unless told: ``$XDG_CACHE_HOME/tieredstore/spark``, else
    ``~/.cache/tieredstore/spark``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tieredstore" / "spark"


def merge_conf(shipped: Mapping[str, str], conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with the pack's settings added: archives and the executors'
    ``PYTHONPATH`` are joined to the caller's (the pack's first), anything else
    the caller gave wins."""
    out = {**shipped, **conf}
    for key, sep in (("spark.archives", ","), ("spark.executorEnv.PYTHONPATH", os.pathsep)):
        if key in conf and key in shipped and conf[key] != shipped[key]:
            out[key] = f"{shipped[key]}{sep}{conf[key]}"
    return out


def pack(cache_dir: str | os.PathLike[str] | None = None) -> Pack:
    """The pack of this environment, built into ``cache_dir`` unless already there;
    :class:`PackError` if a requirement is missing or lists no files."""
    directory = (Path(cache_dir) if cache_dir is not None else default_cache_dir()).absolute()
    dists = closure()
    files = sorted(package_files())
    installed = list(dist_files(dists))
    digest = hashlib.sha256()
    for line in (sys.implementation.cache_tag, sysconfig.get_platform(),
                 *(f"{metadata_name(d)}=={d.version}" for d in dists)):
        digest.update(line.encode() + b"\n")
    for path, name in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    # A distribution reinstalled (or edited) in place keeps its version: its
    # files' sizes and times tell (reading ~235 MB on every session would not pay).
    for path, name in installed:
        stat = path.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"{ALIAS}-{digest.hexdigest()[:20]}.tar.gz"
    if not archive.is_file():
        _write(archive, lambda out: _tar(out, [*files, *installed]))
    launcher = directory / LAUNCHER
    if not launcher.is_file() or launcher.read_text() != LAUNCHER_TEXT:
        _write(launcher, lambda out: out.write(LAUNCHER_TEXT.encode()))
    return Pack(archive, launcher, worker_python())


def _write(target: Path, fill: Callable[[BinaryIO], object]) -> None:
    """Write ``target`` through a temporary file in its directory, flushed to the
    disk, then renamed into place (a name that appears is never rebuilt: it must
    not name bytes that did not reach the disk)."""
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            fill(out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _tar(out: BinaryIO, members: list[tuple[Path, str]]) -> None:
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=COMPRESSLEVEL) as tar:
        for path, name in members:
            tar.add(path, arcname=name, recursive=False)


def package_files() -> Iterator[tuple[Path, str]]:
    """(file, name in the archive) for the ``tieredstore`` package this process
    imports and the ``pyspark_tieredstore*`` modules beside it."""
    package = Path(__file__).resolve().parents[1]
    root = package.parent
    for path in package.rglob("*"):
        if path.is_file() and path.suffix in SHIPPED_SUFFIXES and "__pycache__" not in path.parts:
            yield path, path.relative_to(root).as_posix()
    for module in root.glob("pyspark_tieredstore*.py"):
        yield module, module.name


def metadata_name(dist: metadata.Distribution) -> str:
    return normalize(str(dist.metadata["Name"]))


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(extras: Iterable[str] = ("spark",), *, requires: Iterable[str] | None = None
            ) -> list[metadata.Distribution]:
    """The installed distributions tieredstore's runtime requirements and its
    ``extras`` need, transitively, minus what Spark provides; sorted by name.
    The default is the pack's (the ``spark`` extra); ``closure(())`` is what an
    install without extras holds (the core: embedding the store, the CLI).

    ``requires``: the requirements to start from, as ``Requires-Dist`` lines
    (default: the installed tieredstore's; a test passes a checkout's
    ``pyproject.toml`` ones). A requirement under an extra's marker
    (``; extra == "x"``) is followed only if that extra was asked for: one of
    ``extras`` for tieredstore's own, ``x`` of a distribution that a
    requirement names as ``name[x]``. One with another marker (a Python
    version, a platform) is followed if its distribution is installed, skipped
    if not: markers that exclude it here left it uninstalled. A requirement
    without a marker that is not installed is an error, as the workers would
    fail to import it."""
    if requires is None:
        try:
            requires = metadata.requires("tieredstore") or []
        except metadata.PackageNotFoundError:
            raise PackError("tieredstore is not installed (pip install "
                            "'tieredstore[spark]'): its requirements name what to ship") from None
    wanted = needed(list(requires), {normalize(e) for e in extras}, base=True)
    found: dict[str, metadata.Distribution] = {}
    followed: dict[str, set[str]] = {}  # the extras asked of each one found
    while wanted:
        requirement = wanted.pop()
        match = _REQUIREMENT.match(requirement)
        if match is None:
            continue
        name = normalize(match.group(1))
        asked = {normalize(e) for e in (match.group(2) or "").split(",") if e.strip()}
        if name in PROVIDED:
            continue
        if name in found:
            more = asked - followed[name]
            followed[name] |= more
            wanted += needed(found[name].requires or [], more, base=False)
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if ";" in requirement:
                continue
            raise PackError(f"{requirement!r} is required but not installed; "
                              "install it where you pack") from None
        found[name], followed[name] = dist, asked
        wanted += needed(dist.requires or [], asked, base=True)
    return [found[name] for name in sorted(found)]


def needed(requirements: list[str], extras: set[str], *, base: bool) -> list[str]:
    """Those of ``requirements`` that ``extras`` ask for, and (``base``) those
    under no extra's marker."""
    out = []
    for requirement in requirements:
        named = {normalize(e) for e in _EXTRA.findall(requirement.partition(";")[2])}
        if (named & extras) if named else base:
            out.append(requirement)
    return out


def dist_files(dists: list[metadata.Distribution]) -> Iterator[tuple[Path, str]]:
    """(file, name in the archive) for each installed file of ``dists`` that lies
    in its site directory (scripts installed elsewhere and byte code are left)."""
    for dist in dists:
        if dist.files is None:
            raise PackError(f"{metadata_name(dist)} {dist.version} lists no files "
                              "(no RECORD): reinstall it with pip to pack it")
        if _editable(dist):
            raise PackError(f"{metadata_name(dist)} {dist.version} is installed editable "
                              "(pip install -e): its code is not in the site directory, "
                              "so the pack would not hold it; install it without -e to "
                              "pack it")
        for entry in dist.files:
            name = entry.as_posix()
            if name.startswith("../") or "__pycache__" in entry.parts or name.endswith(".pyc"):
                continue
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                yield path, name


def _editable(dist: metadata.Distribution) -> bool:
    """Whether pip installed ``dist`` editable (PEP 660/610 ``direct_url.json``)."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return False
    return isinstance(direct, dict) and bool((direct.get("dir_info") or {}).get("editable"))
