"""What every command shares: options, configuration, tables, progress bars."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn

from tieredstore.config import (
    DURATION_HELP,
    SIZE_HELP,
    TieredStoreConfig,
    UnitError,
    human_seconds,
    human_size,
    load_config,
    near_miss,
    parse_duration,
    parse_size,
)
from tieredstore.errors import ConfigError, InvalidName, TieredStoreError
from tieredstore.names import validate_name
from tieredstore.store import (
    MAX_TIMESTAMP,
    ObjectStore,
    ReadOnlyCluster,
    holds_local_store,
    open_object_store,
)

DEFAULT_CONFIG = "conf/tieredstore.toml"

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and found something wrong (a mismatch, a corrupt queue)
EXIT_USAGE = 2  # bad arguments, or an error that stopped the command


class CliError(TieredStoreError):
    """The command cannot run as asked (a missing directory, an unreadable file)."""


class UnknownQueue(CliError, LookupError):
    """A topic or queue the command was asked for is not in the store."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (and exit 2, as argparse's), and
    whose help is plain text (:func:`plain`: the docstrings' markup taken out)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """A value outside ``choices`` (a command, a ledger action, a backend) is an
        error that names the choice it looks like a misspelling of, if any."""
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(c) for c in choices]
        near = near_miss(names, str(value))
        hint = f"; did you mean {near!r}?" if near else ""
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose from "
                                             f"{', '.join(names)})")

    def format_help(self) -> str:
        return plain(super().format_help())


# ``x`` and :role:`x` (:role:`~a.b.x` shows x), as docstrings write them.
_MARKUP = re.compile(r"``([^`]+)``|:[a-z]+:`(~?)([^`]+)`")


def plain(text: str) -> str:
    """``text`` without reST markup: ````x```` and ``:mod:`x``` become ``x``,
    ``:func:`~a.b``` becomes ``b``."""
    def one(match: re.Match[str]) -> str:
        if match[1] is not None:
            return match[1]
        return match[3].rsplit(".", 1)[-1] if match[2] else match[3]
    return _MARKUP.sub(one, text)


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


# The store's location: flag -> (config key, metavar, help). The same names on
# every command; each overrides its key from the file and the environment.
LOCATION: dict[str, tuple[str, str | None, str]] = {
    "--backend": ("backend", "NAME", "where the store is: local (a directory) or s3 (a bucket); "
                  "default: local with --data-dir, s3 with --bucket, --endpoint or --region, "
                  "else the configured backend "
                  "(memory: the demo only)"),
    "--data-dir": ("local_path", "DIR", "the local backend's directory (local_path)"),
    "--bucket": ("s3_bucket", "NAME", "the S3 bucket (s3_bucket)"),
    "--endpoint": ("s3_endpoint_url", "URL", "an S3-compatible server's URL, e.g. "
                   "http://127.0.0.1:9000 (s3_endpoint_url; default: AWS)"),
    "--region": ("s3_region", "NAME", "the bucket's region (s3_region)"),
    "--prefix": ("key_prefix", "PREFIX", "the key prefix the message store's keys are under "
                 "(key_prefix); not a managed ledger's: ledger commands refuse it"),
    "--cluster": ("cluster", "NAME", "the cluster name in the message store's keys (cluster); "
                  "ledger commands refuse it"),
    "--broker": ("broker", "NAME", "the broker name in the message store's keys (broker): "
                 "the one the writing commands act on; the reading ones (inspect, verify, "
                 "consume, query, metrics, gc) read every broker of the cluster, and it "
                 "narrows them (NAME[,NAME...]); ledger commands refuse it"),
}
# The flags above that name the message store's keys only: a managed ledger's keys
# are under ledger_root and offload_prefix (PIP-17's {offload_prefix}/{uuid}-ledger-{id}).
MESSAGE_STORE_KEYS = ("--prefix", "--cluster", "--broker")
BACKENDS = ("local", "s3", "memory")
PRECEDENCE = ("a flag overrides TIEREDSTORE_<KEY> environment variables, which override the "
              "--config file, which overrides the defaults. S3 credentials are never flags: "
              "they come from s3_access_key_id/s3_secret_access_key or, when empty, from "
              "boto3's chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, ~/.aws, instance roles)")


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """The store's location (``--config``, ``--backend``, ``--data-dir``, ``--bucket``,
    ``--endpoint``, ``--region``, ``--prefix``, ``--cluster``, ``--broker``,
    ``--create-bucket``) as one argument group; :func:`resolve_config` applies them.

    Every default is SUPPRESS, so that an option given before a command name is
    not reset by the command's parser (:func:`option_defaults` gives the values
    of options not given).
    """
    suppress = argparse.SUPPRESS
    group = parser.add_argument_group("store location", textwrap.fill(PRECEDENCE, 78))
    group.add_argument("--config", metavar="TOML", default=suppress,
                       help=f"configuration file (default: {DEFAULT_CONFIG} if it exists)")
    for flag, (key, metavar, text) in LOCATION.items():
        group.add_argument(flag, dest=key, metavar=metavar, default=suppress, help=text,
                           choices=BACKENDS if flag == "--backend" else None)
    group.add_argument("--create-bucket", dest="s3_create_bucket", action="store_true",
                       default=suppress,
                       help="create the S3 bucket if it does not exist (s3_create_bucket): "
                            "produce, demo and ledger append; the commands that read an "
                            "existing store refuse it. Without it a missing bucket is an "
                            "error")


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """What every command takes: :func:`add_store_options`, ``--json``,
    ``--quiet``, ``--debug`` (SUPPRESS defaults, as there)."""
    suppress = argparse.SUPPRESS
    add_store_options(parser)
    parser.add_argument("--json", action="store_true", default=suppress,
                        help="print JSON on stdout: one document (consume and query: one "
                             "object a line); the shape of each command is in its --help")
    parser.add_argument("-q", "--quiet", action="store_true", default=suppress,
                        help="no progress bars and no summary on stderr")
    parser.add_argument("--debug", action="store_true", default=suppress,
                        help="on an error, print the traceback too; log at DEBUG")


def add_metrics_port(parser: argparse.ArgumentParser, served: str) -> None:
    """``--metrics-port``, on the commands that serve metrics only (``served``
    says what they serve). A command serves only when given it: the
    configuration's ``metrics_port`` is a broker's, and a command run beside
    the broker must not take its port (:func:`resolve_config`)."""
    parser.add_argument("--metrics-port", metavar="PORT", type=port_number, default=None,
                        help=f"serve {served} to Prometheus on metrics_host:PORT (127.0.0.1 "
                             "by default) while the command runs; without it the command "
                             "serves nothing, whatever the configuration's metrics_port")


def add_take_over(parser: argparse.ArgumentParser, what: str = "the broker") -> None:
    """``--take-over``, on the commands that take a broker or managed ledger over:
    without it they refuse while another writer is live (its liveness record,
    docs/writers.md), naming it; the newest open still wins when given."""
    parser.add_argument("--take-over", action="store_true",
                        help=f"take {what} over even while another writer is live: that "
                             "writer is fenced for good (without it the command refuses, "
                             "naming the writer and when it was last seen)")


def option_defaults() -> dict[str, Any]:
    """The value of each common option when it is not given."""
    return {"config": None, **{key: None for key, _, _ in LOCATION.values()},
            "s3_create_bucket": False, "json": False, "quiet": False, "debug": False,
            "metrics_port": None}


S3_FLAGS = ("--bucket", "--endpoint", "--region")


def location_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys the location flags in ``args`` set (none of a flag not given).
    Without ``--backend``, ``--data-dir`` means backend local and ``--bucket``,
    ``--endpoint`` or ``--region`` backend s3; both kinds at once are refused."""
    given = {key: getattr(args, key) for key, _, _ in LOCATION.values()
             if getattr(args, key, None) is not None}
    if "backend" not in given:
        s3 = [flag for flag in S3_FLAGS if LOCATION[flag][0] in given]
        if "local_path" in given and s3:
            raise CliError(f"--data-dir names a local store and {s3[0]} an S3 one: add "
                           "--backend local or --backend s3")
        if "local_path" in given:
            given["backend"] = "local"
        elif s3:
            given["backend"] = "s3"
    if getattr(args, "s3_create_bucket", False):
        given["s3_create_bucket"] = True
    return given


def store_flags_given(args: argparse.Namespace) -> list[str]:
    """The store options given in ``args``, by their flags."""
    return [*(["--config"] if getattr(args, "config", None) is not None else []),
            *(flag for flag, (key, _, _) in LOCATION.items()
              if getattr(args, key, None) is not None),
            *(["--create-bucket"] if getattr(args, "s3_create_bucket", False) else [])]


def config_path(args: argparse.Namespace) -> str | None:
    """``--config``, else :data:`DEFAULT_CONFIG` if it exists here, else None."""
    path: str | None = getattr(args, "config", None)
    if path is None and os.path.exists(DEFAULT_CONFIG):
        path = DEFAULT_CONFIG
    return path


def flags_given(args: argparse.Namespace) -> dict[str, str]:
    """Config key -> the flag in ``args`` that set it (the store's location,
    ``--create-bucket``, ``--metrics-port``)."""
    given = {key: flag for flag, (key, _, _) in LOCATION.items()
             if getattr(args, key, None) is not None}
    if getattr(args, "s3_create_bucket", False):
        given["s3_create_bucket"] = "--create-bucket"
    if getattr(args, "metrics_port", None) is not None:
        given["metrics_port"] = "--metrics-port"
    return given


def resolve_config(args: argparse.Namespace, flags: Mapping[str, str] | None = None, /,
                   **overrides: Any) -> TieredStoreConfig:
    """The configuration a command runs with: defaults < file < environment <
    flags (:func:`location_overrides`, ``--metrics-port``) < ``overrides``.
    ``metrics_port`` is ``--metrics-port`` or 0 (serve nothing): never the
    file's or the environment's (see :func:`add_metrics_port`). An error about
    a key a flag set names the flag (``(given as --bucket)``); ``flags`` names
    those of ``overrides`` that a command's own flags set (key -> flag)."""
    overrides = {"metrics_port": getattr(args, "metrics_port", None) or 0,
                 **location_overrides(args), **overrides}
    origins = {key: f"given as {flag}" for key, flag in {**flags_given(args),
                                                          **(flags or {})}.items()}
    try:
        return load_config(config_path(args), origins=origins, **overrides)
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


# --- the cluster view: the commands that read every broker -----------------------------


def broker_selection(args: argparse.Namespace) -> tuple[str, ...] | None:
    """``--broker`` on a command that reads the cluster: the brokers it narrows
    to (``a`` or ``a,b``), or None when not given (every broker of the cluster;
    the configuration's ``broker`` is not a selection)."""
    given: str | None = getattr(args, "broker", None)
    if given is None:
        return None
    try:
        return tuple(dict.fromkeys(validate_name("broker", b) for b in given.split(",")))
    except InvalidName as exc:
        raise CliError(f"--broker: {exc}") from None


def cluster_config(args: argparse.Namespace, **overrides: Any) -> TieredStoreConfig:
    """:func:`resolve_config` for a command that reads the cluster: ``--broker``
    selects brokers there (:func:`broker_selection`), it sets no key."""
    return resolve_config(argparse.Namespace(**{**vars(args), "broker": None}), **overrides)


async def read_only_cluster(args: argparse.Namespace, *, store: ObjectStore | None = None
                            ) -> ReadOnlyCluster:
    """Every broker of the :func:`existing` store's cluster that ``args`` name
    (``--broker`` narrows), for reading only (no disk cache left behind);
    ``async with`` closes it and its backend (not ``store``'s, when given)."""
    config = existing(cluster_config(args, disk_cache_bytes=0))
    return await ReadOnlyCluster.open(config, store=store, brokers=broker_selection(args))


async def check_in_cluster(cluster: ReadOnlyCluster, topic: str | None = None,
                           queue: int | None = None) -> None:
    """Raise :class:`UnknownQueue` if ``topic`` (and ``queue``), or a broker
    ``--broker`` named, is not in ``cluster``'s brokers: the message says
    which brokers hold it when the selection left them out
    (``ReadOnlyCluster.unknown``, which lists every broker's queues)."""
    problem = await cluster.unknown(topic, queue)
    if problem is not None:
        raise UnknownQueue(problem)


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


def port_number(text: str) -> int:
    """An argparse type: a TCP port in [1, 65535]."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port in [1, 65535], got {value}")
    return value


def size(lo: int = 0) -> Callable[[str], int]:
    """An argparse type: a whole number of bytes, at least ``lo``, read as the
    configuration reads one (``100``, ``512KiB``, ``10MiB``:
    :func:`~tieredstore.config.parse_size`; ``10MB`` is refused as ambiguous)."""
    def parse(text: str) -> int:
        try:
            value = parse_size(text)
        except UnitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a size: {text!r} ({SIZE_HELP})") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be at least {human_size(lo)}, got {text!r}")
        return value
    return parse


def seconds(lo: float, hi: float, *, needs_unit: bool = False) -> Callable[[str], float]:
    """An argparse type: a duration in ``[lo, hi]`` seconds (never nan or inf), read
    as the configuration reads one (``500ms``, ``72h``, ``1h30m``:
    :func:`~tieredstore.config.parse_duration`). A plain number is seconds, except
    with ``needs_unit`` (a flag standing for a key that deletes data when its time
    runs out, such as ``gc_safety_age``): there it is refused as the key refuses it,
    0 excepted."""
    def parse(text: str) -> float:
        try:
            value = parse_duration(text, bare=not needs_unit)
        except UnitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} ({DURATION_HELP})"
                                             ) from None
        if not lo <= value <= hi:  # False for nan
            raise argparse.ArgumentTypeError(f"must be a duration in [{human_seconds(lo)}, "
                                             f"{human_seconds(hi)}], got {text!r}")
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


def offsets(first: int, end: int) -> str:
    """The one notation of a range of offsets in what the command prints: half-open
    ``[first, end)``, as the library and docs/chunks.md write ranges."""
    return f"[{first}, {end})"


def print_json(document: object) -> None:
    """One JSON document on stdout (``--json`` of every command but consume and query)."""
    print(json.dumps(document, indent=1, ensure_ascii=False, default=str))


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


def spark_extra(what: str) -> Any | None:
    """``tieredstore.spark``, or None where the ``spark`` extra is not installed,
    having said on stderr that ``what`` needs it."""
    try:
        return importlib.import_module("tieredstore.spark")
    except ImportError as exc:
        print(f"tieredstore: {what} needs the spark extra ({exc}): pip install "
              "'tieredstore[spark]'", file=sys.stderr)
        return None


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
