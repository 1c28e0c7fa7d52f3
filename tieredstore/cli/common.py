"""What every command shares: options, configuration, tables, progress bars."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import ConfigError, TieredStoreError
from tieredstore.store import (
    MAX_TIMESTAMP,
    ObjectStore,
    ReadOnlyMessageStore,
    holds_local_store,
    open_object_store,
)

DEFAULT_CONFIG = "conf/tieredstore.toml"

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and found something wrong (a mismatch, a corrupt queue)
EXIT_USAGE = 2  # bad arguments, or an error that stopped the command


class CliError(TieredStoreError):
    """The command cannot run as asked (a missing directory, an unreadable file)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (and exit 2, as argparse's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong: the library's message as it is, others with
    what kind of failure they are."""
    if isinstance(exc, TieredStoreError):
        text = str(exc)
    elif isinstance(exc, MemoryError):
        text = "out of memory" + (f": {exc}" if str(exc) else "")
    elif isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename!r}" if exc.filename is not None else ""
        text = f"{exc.strerror}{where} ({type(exc).__name__}, errno {exc.errno})"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(text.split())


def add_common_options(parser: argparse.ArgumentParser, *, data_dir_default: str | None = None
                       ) -> None:
    """``--config``, ``--data-dir`` and ``--quiet``, on the main parser and every command.

    The command's copies default to SUPPRESS, so that an option given before
    the command name is not reset by the command's parser.
    """
    suppress = argparse.SUPPRESS
    parser.add_argument("--config", metavar="TOML", default=suppress,
                        help=f"configuration file (default: {DEFAULT_CONFIG} if it exists); "
                             "TIEREDSTORE_<KEY> environment variables override it")
    parser.add_argument("--data-dir", metavar="DIR",
                        default=data_dir_default if data_dir_default is not None else suppress,
                        help="directory of the local backend (overrides local_path and "
                             "selects backend = local)")
    parser.add_argument("-q", "--quiet", action="store_true", default=suppress,
                        help="no progress bars")
    parser.add_argument("--debug", action="store_true", default=suppress,
                        help="on an error, print the traceback too; log at DEBUG")
    parser.add_argument("--metrics-port", metavar="PORT", type=int, default=suppress,
                        help="serve the store's Prometheus metrics on 127.0.0.1:PORT while "
                             "the command runs (metrics_port; commands that open a store)")
    parser.add_argument("--create-bucket", action="store_true", default=suppress,
                        help="create the S3 bucket if it does not exist (s3_create_bucket); "
                             "without it a missing bucket is an error")


def resolve_config(args: argparse.Namespace, **overrides: Any) -> TieredStoreConfig:
    """The configuration a command runs with: file, environment, ``--data-dir``, overrides."""
    path = getattr(args, "config", None)
    if path is None and os.path.exists(DEFAULT_CONFIG):
        path = DEFAULT_CONFIG
    data_dir = getattr(args, "data_dir", None)
    if data_dir is not None:
        overrides = {"backend": "local", "local_path": str(data_dir), **overrides}
    if getattr(args, "create_bucket", False):
        overrides = {"s3_create_bucket": True, **overrides}
    if getattr(args, "metrics_port", None) is not None:
        overrides = {"metrics_port": args.metrics_port, **overrides}
    try:
        return load_config(path, **overrides)
    except ConfigError as exc:
        if exc.key != "file" or getattr(args, "config", None) is None:
            raise
        raise CliError(f"--config: {exc.detail}") from None


def existing(config: TieredStoreConfig) -> TieredStoreConfig:
    """``config``, for commands that only read: refuses a local directory that holds
    no store (rather than creating an empty store there), and the memory backend."""
    if config.backend == "local" and not holds_local_store(config.local_path):
        raise CliError(f"no local store at {config.local_path!r} "
                       "(give --data-dir or set local_path)")
    if config.backend == "memory":
        raise CliError("backend 'memory' holds nothing between commands; "
                       "use 'local' or 's3'")
    return config


def open_existing_store(config: TieredStoreConfig) -> ObjectStore:
    """The backend of an :func:`existing` store (``async with`` closes it)."""
    return open_object_store(existing(config))


async def read_only_store(args: argparse.Namespace) -> ReadOnlyMessageStore:
    """The :func:`existing` store ``args`` name, for reading only (no disk cache
    left behind); ``async with`` closes it and its backend."""
    return await ReadOnlyMessageStore.open(existing(resolve_config(args, disk_cache_bytes=0)))


def positive_int(text: str) -> int:
    """An argparse type: an int >= 1."""
    value = nonnegative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """An argparse type: an int >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def seconds(lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a number of seconds in ``[lo, hi]`` (never nan or inf)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not lo <= value <= hi:  # False for nan
            raise argparse.ArgumentTypeError(f"must be a number of seconds in [{lo:g}, {hi:g}], "
                                             f"got {text!r}")
        return value
    return parse


def timestamp_ms(text: str) -> int:
    """An argparse type: milliseconds since the epoch, in [0, 2^63)."""
    value = nonnegative_int(text)
    if value > MAX_TIMESTAMP:
        raise argparse.ArgumentTypeError(f"must be at most 2^63 - 1 milliseconds, got {value}")
    return value


def progress_enabled(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stdout.isatty()


# --- output -----------------------------------------------------------------------


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """A plain text table; numbers right-aligned, None as ``-``, flags as yes or no."""
    cells = [[str(c) for c in header], *([_cell(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [all(_is_number(r[i]) for r in cells[1:]) and len(cells) > 1
               for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        out = [c.rjust(w) if num else c.ljust(w)
               for c, w, num in zip(row, widths, numeric, strict=True)]
        return "  ".join(out).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths),
                      *(line(r) for r in cells[1:])])


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "-" if value is None else str(value)


def _is_number(text: str) -> bool:
    return text.replace(",", "").replace(".", "", 1).lstrip("-").isdigit() or text == "-"


def format_requests(snapshot: dict[str, dict[str, int | float]]) -> str:
    """``get 12, list 3, put 40`` from a :class:`RequestMetrics` snapshot."""
    requests = snapshot.get("requests", {})
    if not requests:
        return "none"
    total = sum(int(v) for v in requests.values())
    parts = ", ".join(f"{op} {int(n)}" for op, n in sorted(requests.items()))
    return f"{total} ({parts})"


# --- progress bars -----------------------------------------------------------------


@dataclass
class Progress:
    """A tqdm bar when enabled and tqdm is installed, else nothing at all."""

    bar: Any = None

    def update(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def write(self, text: str) -> None:
        """Write ``text`` to stdout without tearing the bar."""
        if self.bar is None:
            sys.stdout.write(text)
            return
        with self.bar.external_write_mode(file=sys.stdout):
            sys.stdout.write(text)
            sys.stdout.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def progress(enabled: bool, *, total: int | None = None, desc: str = "",
             unit: str = "msg") -> Progress:
    """A progress bar on stderr (``unit="B"`` scales to KiB/MiB)."""
    if not enabled:
        return Progress()
    try:
        tqdm = importlib.import_module("tqdm").tqdm
    except ImportError:  # an optional nicety: the command runs the same without it
        return Progress()
    scale = unit == "B"
    return Progress(tqdm(total=total, desc=desc, unit=unit, unit_scale=scale,
                         unit_divisor=1024 if scale else 1000, leave=False, dynamic_ncols=True))
