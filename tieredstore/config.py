"""Configuration: one frozen dataclass, loaded from TOML, environment and code.

Precedence, lowest first: defaults here, ``conf/tieredstore.toml`` (or the
file given), ``TIEREDSTORE_<KEY>`` environment variables, keyword overrides
in code. Every key is validated; a bad value raises :class:`ConfigError`
naming the key (and where it was set) and what it allows, ranges in human
units. ``conf/tieredstore.toml`` documents every key; a test keeps the two in
step.

Names (``cluster``, ``broker``, ``key_prefix``) and paths are checked when
the configuration is built, before anything is written. The S3 secret never
shows: not in ``repr``/``str`` of the configuration, nor in any error.

Each setting has one default. Keys a layer's own options type also holds
take that type's default (``RetryPolicy``, ``ObjectStoreOptions``,
``S3Settings``, ``SegmentOptions``, ``PoolOptions``, ``FetcherOptions``, the
metadata page size): the layers never read this module, and
:mod:`tieredstore.store.compose` maps these keys onto their options.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tieredstore.errors import ConfigError, InvalidName
from tieredstore.fetcher.fetcher import FetcherOptions
from tieredstore.metadata.queue import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from tieredstore.objectstore.chokepoint import RetryPolicy
from tieredstore.objectstore.factory import BACKENDS, ObjectStoreOptions
from tieredstore.objectstore.s3 import S3Settings
from tieredstore.segment.chunked import SegmentOptions
from tieredstore.segment.path import validate_name
from tieredstore.segment.pool.options import PoolOptions
from tieredstore.sizes import GiB, KiB, MiB

log = logging.getLogger(__name__)


ENV_PREFIX = "TIEREDSTORE_"
# Environment variables with the prefix that are not keys and never were.
ENV_NOT_KEYS = ("config",)
# Keys whose values never appear in a repr, a str or an error message.
SECRET_KEYS = frozenset({"s3_secret_access_key"})
REDACTED = "<redacted>"
# Smallest max_message_size: a record's framing alone is 42 bytes.
MIN_MESSAGE_SIZE = 64
DEFAULT_MAX_MESSAGE_SIZE = 4 * MiB
INF = math.inf


def _knob(default: Any, lo: float | None = None, hi: float | None = None,
          choices: tuple[str, ...] | None = None, unit: str = "") -> Any:
    """A key's default, its range or choices, and its unit ("bytes", "s" or "")."""
    return field(default=default,
                 metadata={"lo": lo, "hi": hi, "choices": choices, "unit": unit})


def _size(default: int, lo: int, hi: int) -> Any:
    return _knob(default, lo, hi, unit="bytes")


def _seconds(default: float, lo: float, hi: float) -> Any:
    return _knob(default, lo, hi, unit="s")


YEAR = 365 * 24 * 3600.0

# The layers' own defaults, which the keys below take.
_RETRY = RetryPolicy()
_STORE = ObjectStoreOptions()
_S3: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(S3Settings)}
_SEGMENT = SegmentOptions()
_FETCHER = FetcherOptions()
_POOL = PoolOptions()


@dataclass(frozen=True, slots=True)
class TieredStoreConfig:
    """Every knob of the library. See ``conf/tieredstore.toml`` for meanings."""

    # where the data lives
    backend: str = _knob(_STORE.backend, choices=BACKENDS)
    local_path: str = _knob(_STORE.local_path)
    local_fsync: bool = _knob(_STORE.local_fsync)
    s3_bucket: str = _knob("")
    s3_create_bucket: bool = _knob(_STORE.create_bucket)
    s3_endpoint_url: str = _knob("")
    s3_region: str = _knob("")
    s3_addressing_style: str = _knob(_S3["addressing_style"], choices=("auto", "path", "virtual"))
    s3_access_key_id: str = _knob("")
    s3_secret_access_key: str = _knob("")
    s3_max_pool_connections: int = _knob(_S3["max_pool_connections"], 1, 1024)
    key_prefix: str = _knob("tieredstore")
    cluster: str = _knob("default-cluster")
    broker: str = _knob("broker-0")

    # requests
    request_timeout: float = _seconds(_RETRY.timeout, 0.001, 3600)
    connect_timeout: float = _seconds(_S3["connect_timeout"], 0.001, 600)
    retry_max_attempts: int = _knob(_RETRY.max_attempts, 1, 100)
    retry_base_delay: float = _seconds(_RETRY.base_delay, 0.0, 60)
    retry_max_delay: float = _seconds(_RETRY.max_delay, 0.0, 600)

    # segments
    chunk_size: int = _size(_SEGMENT.chunk_size, 1 * KiB, 5 * GiB)
    merge_on_seal: bool = _knob(_SEGMENT.merge_on_seal)
    commit_log_max_size: int = _size(1 * GiB, 1 * KiB, 5 * 10_000 * GiB)
    consume_queue_max_size: int = _size(64 * MiB, 1 * KiB, 5 * 10_000 * GiB)
    rolling_interval: float = _seconds(24 * 3600.0, 0.0, YEAR)

    # fetcher
    readahead_chunk_num: int = _knob(_FETCHER.readahead_chunk_num, 0, 64)
    readahead_chunk_max: int = _knob(_FETCHER.readahead_chunk_max, 0, 256)
    readahead_drop_behind: bool = _knob(_FETCHER.drop_behind)
    read_concurrency: int = _knob(_FETCHER.read_concurrency, 1, 1024)
    memory_cache_bytes: int = _size(_FETCHER.memory_bytes, 0, 1024 * GiB)
    disk_cache_bytes: int = _size(0, 0, 100 * 1024 * GiB)
    disk_cache_path: str = _knob("")

    # upload buffer pool
    pool_bytes: int = _size(_POOL.budget_bytes, 1 * KiB, 1024 * GiB)
    group_commit_interval: float = _seconds(_POOL.group_commit_interval, 0.0, 3600)
    upload_concurrency: int = _knob(_POOL.upload_concurrency, 1, 1024)

    # message store
    max_message_size: int = _size(DEFAULT_MAX_MESSAGE_SIZE, MIN_MESSAGE_SIZE, 1 * GiB)
    file_reserved_time: float = _seconds(72 * 3600.0, 0.0, 100 * YEAR)
    timestamp_before_max: float = _seconds(0.0, 0.0, INF)
    timestamp_after_max: float = _seconds(3600.0, 0.0, INF)
    metadata_page_size: int = _knob(DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
    gc_interval: float = _seconds(3600.0, 0.0, 30 * 24 * 3600.0)
    gc_safety_age: float = _seconds(3600.0, 0.0, YEAR)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _check(f, getattr(self, f.name))
        if self.retry_base_delay > self.retry_max_delay:
            raise ConfigError(
                "retry_base_delay",
                f"must not exceed retry_max_delay = {_human(self.retry_max_delay, 's')}, "
                f"got {_human(self.retry_base_delay, 's')}",
            )
        if self.readahead_chunk_num > self.readahead_chunk_max:
            raise ConfigError(
                "readahead_chunk_num",
                f"must not exceed readahead_chunk_max={self.readahead_chunk_max}, "
                f"got {self.readahead_chunk_num}",
            )
        if self.chunk_size % KiB:
            # Consume-queue units are 32 bytes; chunk boundaries must not cut one,
            # or a crash between two chunks of a commit would leave half a unit.
            raise ConfigError("chunk_size", "must be a multiple of 1 KiB, got "
                                            f"{_human(self.chunk_size, 'bytes')}")
        if self.max_message_size > self.commit_log_max_size:
            # A record never spans two commit-log segments.
            raise ConfigError(
                "max_message_size",
                f"{_human(self.max_message_size, 'bytes')} cannot fit a commit-log segment "
                f"(commit_log_max_size = {_human(self.commit_log_max_size, 'bytes')}); "
                "it must not exceed commit_log_max_size")
        if self.backend == "s3" and not self.s3_bucket:
            raise ConfigError("s3_bucket", "is required when backend = 's3'")
        _check_names(self)

    def replace(self, **changes: Any) -> TieredStoreConfig:
        """A copy with some keys changed (validated like any other)."""
        return dataclasses.replace(self, **{k: _coerce(k, v) for k, v in changes.items()})

    def __repr__(self) -> str:
        """Every key; the S3 secret redacted (``<redacted>`` when set)."""
        shown = ", ".join(f"{f.name}={_repr_value(f.name, getattr(self, f.name))}"
                          for f in dataclasses.fields(self))
        return f"TieredStoreConfig({shown})"

    __str__ = __repr__


def _repr_value(key: str, value: Any) -> str:
    if key in SECRET_KEYS and value:
        return repr(REDACTED)
    return repr(value)


def _show(key: str, value: Any, unit: str = "") -> str:
    """A value for an error message: never a secret's; long ones cut short."""
    if key in SECRET_KEYS:
        return f"{type(value).__name__} (value not shown)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an int of {value.bit_length()} bits"
    if unit and isinstance(value, int | float) and not isinstance(value, bool):
        return _human(value, unit)
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}... ({len(text)} characters)"


# --- human units ---------------------------------------------------------------------

_BYTE_UNITS = (("TiB", 1024**4), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB))
_SECOND_UNITS = (("d", 86400.0), ("h", 3600.0), ("min", 60.0))


def human_size(n: int) -> str:
    """``4 MiB``, ``1536 B``: the largest unit the value is a whole number of."""
    for name, factor in _BYTE_UNITS:
        if n >= factor and n % factor == 0:
            return f"{n // factor} {name}"
    if n >= 10 * KiB:  # not a whole number of any unit: bytes, and an approximation
        name, factor = next((u, f) for u, f in _BYTE_UNITS if n >= f)
        return f"{n} B ({n / factor:.1f} {name})"
    return f"{n} B"


def human_seconds(s: float) -> str:
    """``1 h``, ``72 h``, ``36500 d``, ``1 ms``, ``0.5 s``; ``no limit`` for infinity."""
    if math.isinf(s):
        return "no limit" if s > 0 else "-inf"
    if math.isnan(s):
        return "nan"
    if s == 0:
        return "0 s"
    if abs(s) < 1:
        return f"{s * 1000:g} ms"
    for name, factor in _SECOND_UNITS:
        if abs(s) >= factor and s % factor == 0:
            return f"{s / factor:.0f} {name}"
    return f"{s:.0f} s" if s == int(s) else f"{s:g} s"


def _human(value: float, unit: str) -> str:
    if unit == "bytes" and isinstance(value, int):
        return human_size(value)
    if unit == "s":
        return human_seconds(float(value))
    if isinstance(value, int):
        return str(value)
    return f"{value:g}"


# --- checks ------------------------------------------------------------------------------


def _check(f: dataclasses.Field[Any], value: Any) -> None:
    kind = f.type if isinstance(f.type, type) else {"int": int, "float": float, "bool": bool,
                                                     "str": str}[str(f.type)]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        raise ConfigError(f.name, f"must be {kind.__name__}, got {_show(f.name, value)}")
    lo, hi, choices = f.metadata["lo"], f.metadata["hi"], f.metadata["choices"]
    unit = f.metadata["unit"]
    if choices is not None and value not in choices:
        raise ConfigError(f.name, f"must be one of {', '.join(choices)}; "
                                  f"got {_show(f.name, value)}")
    if lo is not None and hi is not None and not lo <= value <= hi:
        allowed = f"[{_human(lo, unit)}, {_human(hi, unit)}]"
        if unit == "s" and math.isinf(hi):
            allowed = f"at least {_human(lo, unit)} (inf: no limit)"
            raise ConfigError(f.name, f"must be {allowed}, got {_show(f.name, value, unit)}")
        raise ConfigError(f.name, f"must be in {allowed}, got {_show(f.name, value, unit)}")
    if isinstance(value, str) and "\x00" in value:
        raise ConfigError(f.name, "must not contain a NUL character")


# botocore's own rules, so that a bad name is a ConfigError here rather than a
# ParamValidationError or InvalidRegionError at the first request.
_BUCKET = re.compile(r"^[a-zA-Z0-9.\-_]{1,255}$")
_REGION = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?$")


def _check_names(config: TieredStoreConfig) -> None:
    """Names that become parts of object keys, and S3 settings botocore would refuse."""
    for key in ("cluster", "broker"):
        try:
            validate_name(key, getattr(config, key))
        except InvalidName as exc:
            raise ConfigError(key, str(exc)) from None
    if config.key_prefix:
        for part in config.key_prefix.split("/"):
            if not part:
                raise ConfigError("key_prefix", f"{config.key_prefix!r} must be names "
                                                "joined by '/': no leading, trailing or "
                                                "double '/'")
            try:
                validate_name("key_prefix", part)
            except InvalidName as exc:
                raise ConfigError("key_prefix", f"{config.key_prefix!r}: {exc}") from None
    if not config.local_path:
        raise ConfigError("local_path", "must not be empty (use '.' for the working "
                                        "directory)")
    if config.s3_bucket and not _BUCKET.match(config.s3_bucket):
        raise ConfigError("s3_bucket", f"{config.s3_bucket!r} is not a bucket name: letters, "
                                       "digits, '.', '-' and '_', 1 to 255 of them "
                                       "(S3 itself takes 3 to 63 lower-case ones)")
    if config.s3_region and not _REGION.match(config.s3_region):
        raise ConfigError("s3_region", f"{config.s3_region!r} is not a region name "
                                       "(such as us-east-1)")
    url = config.s3_endpoint_url
    if url and not re.match(r"^https?://[^/\s]+", url):
        raise ConfigError("s3_endpoint_url", f"{url!r} must be an http:// or https:// URL "
                                             "(such as http://localhost:8333)")


def check_paths(config: TieredStoreConfig, *, backend: bool = True) -> None:
    """The directories the configuration names can hold what it puts there.

    Nothing is created: a directory that does not exist yet must have an
    existing directory as its nearest existing ancestor. The local store
    directory (checked when ``backend``) may be read-only (readers); the disk
    cache, when on, must be writable.
    """
    if backend and config.backend == "local":
        _check_dir("local_path", config.local_path, writable=False)
    if config.disk_cache_bytes > 0:
        key = "disk_cache_path" if config.disk_cache_path else "local_path"
        path = config.disk_cache_path or os.path.join(config.local_path, "cache")
        _check_dir(key, path, writable=True, what="the disk cache directory ")


def _check_dir(key: str, path: str, *, writable: bool, what: str = "") -> None:
    try:
        _check_dir_exists(key, path, writable=writable, what=what)
    except OSError as exc:  # a name too long, a loop of links...
        raise ConfigError(key, f"{what}{_show(key, path)} cannot be used: "
                               f"{exc.strerror or exc}") from None


def _check_dir_exists(key: str, path: str, *, writable: bool, what: str) -> None:
    target = Path(path)
    if target.exists():
        if not target.is_dir():
            raise ConfigError(key, f"{what}{path!r} exists and is not a directory")
        if writable and not os.access(target, os.W_OK | os.X_OK):
            raise ConfigError(key, f"{what}{path!r} is not writable")
        return
    parent = target.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(key, f"{what}{path!r} cannot be created: {str(parent)!r} is not "
                               "a directory")
    if writable and not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(key, f"{what}{path!r} cannot be created: {str(parent)!r} is not "
                               "writable")


# --- loading -----------------------------------------------------------------------------

_FIELDS = {f.name: f for f in dataclasses.fields(TieredStoreConfig)}


def _near_miss(key: str) -> str | None:
    """The known key ``key`` looks like a misspelling of, if any."""
    found = difflib.get_close_matches(key, _FIELDS, n=1, cutoff=0.8)
    return found[0] if found else None


def _unknown(key: str) -> ConfigError:
    near = _near_miss(key)
    hint = f"did you mean {near!r}?" if near else "conf/tieredstore.toml lists every key"
    return ConfigError(key, f"unknown key; {hint}")


def _coerce(key: str, value: Any) -> Any:
    """Turn a string (from the environment) or int (for a float) into the key's type."""
    if not isinstance(key, str):
        raise ConfigError(str(key), "a key must be a string")
    f = _FIELDS.get(key)
    if f is None:
        raise _unknown(key)
    kind = str(f.type)
    if isinstance(value, str) and kind != "str":
        text = value.strip()
        try:
            if kind == "bool":
                if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(text)
                return text.lower() in ("1", "true", "yes", "on")
            if kind == "int":
                return _parse_size(text)
            return float(text)
        except (ValueError, OverflowError):
            allowed = {"bool": "true or false", "int": "a whole number"
                       + (" of bytes, with an optional suffix (4MiB, 64k)"
                          if f.metadata["unit"] == "bytes" else ""),
                       "float": "a number" + (" of seconds" if f.metadata["unit"] == "s"
                                              else "")}[kind]
            raise ConfigError(key, f"cannot read {_show(key, value)} as {kind}: must be "
                                   f"{allowed}") from None
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ConfigError(key, f"is too large for a float: an int of "
                                   f"{value.bit_length()} bits") from None
    return value


_SIZE_SUFFIXES = {"k": KiB, "kib": KiB, "kb": KiB, "m": MiB, "mib": MiB, "mb": MiB,
                  "g": GiB, "gib": GiB, "gb": GiB, "t": 1024 * GiB, "tib": 1024 * GiB,
                  "tb": 1024 * GiB, "b": 1}


def _parse_size(text: str) -> int:
    """``4194304``, ``4MiB``, ``4m``, ``1.5KiB``, ``1_000``: a whole number of bytes."""
    lowered = text.lower().replace("_", "").strip()
    for suffix, factor in sorted(_SIZE_SUFFIXES.items(), key=lambda kv: -len(kv[0])):
        if lowered.endswith(suffix) and lowered[: -len(suffix)].strip():
            number = lowered[: -len(suffix)].strip()
            try:
                return int(number) * factor
            except ValueError:
                exact = float(number) * factor
                if not math.isfinite(exact) or exact != int(exact):
                    raise ValueError(text) from None
                return int(exact)
    return int(lowered)


def _flatten(table: Mapping[str, Any], file: Path, where: str = "") -> dict[str, tuple[Any, str]]:
    """Keys may sit at the top or in TOML tables ([s3], [fetcher]...), each once.

    Returns each key's value and the table it was found in.
    """
    flat: dict[str, tuple[Any, str]] = {}
    for key, value in table.items():
        here = f"[{where}]" if where else "the top level"
        if isinstance(value, Mapping):
            inner = _flatten(value, file, f"{where}.{key}" if where else key)
            for name, (item, place) in inner.items():
                if name in flat:
                    raise ConfigError(name, f"is set twice in {file}: in {flat[name][1]} and "
                                            f"in {place}")
                flat[name] = (item, place)
        else:
            if key in flat:
                raise ConfigError(key, f"is set twice in {file}: in {flat[key][1]} and in "
                                       f"{here}")
            flat[key] = (value, here)
    return flat


def _read_file(path: str | os.PathLike[str]) -> dict[str, tuple[Any, str]]:
    if not isinstance(path, str | os.PathLike):
        raise ConfigError("--config", f"must be a path (str or PathLike), got "
                                      f"{type(path).__name__}")
    file = Path(path)
    try:
        with open(file, "rb") as fh:
            table = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError("--config", f"file {str(file)!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError("--config", f"{str(file)!r} is a directory, not a TOML file") \
            from None
    except UnicodeDecodeError as exc:
        raise ConfigError("--config", f"{str(file)!r} is not a TOML file: not UTF-8 text "
                                      f"(byte {exc.object[exc.start]:#04x} at offset "
                                      f"{exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("--config", f"{str(file)!r} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError("--config", f"cannot read {str(file)!r}: "
                                      f"{exc.strerror or exc}") from None
    return _flatten(table, file)


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> TieredStoreConfig:
    """Defaults < TOML file < ``TIEREDSTORE_*`` environment < ``overrides``.

    Environment variables with the prefix that name no key are ignored (a
    host may have its own ``TIEREDSTORE_HOME``), unless they look like a
    misspelled key. ``max_message_size``, when not set, is at most the
    commit-log segment size and the pool budget.
    """
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if path is not None:
        where = str(path) if isinstance(path, str | os.PathLike) else ""
        for key, (value, place) in _read_file(path).items():
            try:
                values[key] = _coerce(key, value)
            except ConfigError as exc:
                raise ConfigError(exc.key, f"{exc.detail} (in {where}, {place})") from None
            origin[key] = f"in {where}, {place}"
    environ = os.environ if env is None else env
    if not isinstance(environ, Mapping):
        raise ConfigError("env", f"must be a mapping of names to values, got "
                                 f"{type(environ).__name__}")
    for name, value in environ.items():
        if not (isinstance(name, str) and name.startswith(ENV_PREFIX)):
            continue
        key = name[len(ENV_PREFIX):].lower()
        if key in ENV_NOT_KEYS:
            continue
        if key not in _FIELDS:
            near = _near_miss(key)
            if near is None:
                log.debug("ignoring %s: no such configuration key", name)
                continue
            raise ConfigError(key, f"{name} names no key; did you mean {near!r} "
                                   f"({ENV_PREFIX}{near.upper()})?")
        try:
            values[key] = _coerce(key, value)
        except ConfigError as exc:
            raise ConfigError(key, f"{exc.detail} (from {name})") from None
        origin[key] = f"from {name}"
    for key, value in overrides.items():
        values[key] = _coerce(key, value)
        origin[key] = "given in code"
    if "max_message_size" not in values:
        default = DEFAULT_MAX_MESSAGE_SIZE
        limits = [values.get(k) for k in ("commit_log_max_size", "pool_bytes")]
        fits = [v for v in limits if isinstance(v, int) and not isinstance(v, bool)]
        if fits and min(fits) < default:
            values["max_message_size"] = max(min(fits), MIN_MESSAGE_SIZE)
    try:
        config = TieredStoreConfig(**values)
    except ConfigError as exc:
        if exc.key in origin:
            raise ConfigError(exc.key, f"{exc.detail} ({origin[exc.key]})") from None
        raise
    if config.max_message_size > config.pool_bytes:
        raise ConfigError("pool_bytes", f"must be at least max_message_size = "
                                        f"{human_size(config.max_message_size)}, got "
                                        f"{human_size(config.pool_bytes)}")
    check_paths(config)
    return config
