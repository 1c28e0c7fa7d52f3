"""Configuration: one frozen dataclass, loaded from TOML, environment and code.

Precedence, lowest first: defaults here, ``conf/tieredstore.toml`` (or the
file given), ``TIEREDSTORE_<KEY>`` environment variables, keyword overrides
in code. Every key is validated; a bad value raises :class:`ConfigError`
naming the key and what it allows. ``conf/tieredstore.toml`` documents every
key; a test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tieredstore.errors import ConfigError

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

ENV_PREFIX = "TIEREDSTORE_"


def _knob(default: Any, lo: float | None = None, hi: float | None = None,
          choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={"lo": lo, "hi": hi, "choices": choices})


@dataclass(frozen=True, slots=True)
class TieredStoreConfig:
    """Every knob of the library. See ``conf/tieredstore.toml`` for meanings."""

    # where the data lives
    backend: str = _knob("local", choices=("local", "s3", "memory"))
    local_path: str = _knob("./tieredstore-data")
    local_fsync: bool = _knob(True)
    s3_bucket: str = _knob("")
    s3_endpoint_url: str = _knob("")
    s3_region: str = _knob("")
    s3_addressing_style: str = _knob("auto", choices=("auto", "path", "virtual"))
    s3_access_key_id: str = _knob("")
    s3_secret_access_key: str = _knob("")
    s3_max_pool_connections: int = _knob(64, 1, 1024)
    key_prefix: str = _knob("tieredstore")
    cluster: str = _knob("default-cluster")
    broker: str = _knob("broker-0")

    # requests
    request_timeout: float = _knob(30.0, 0.001, 3600)
    connect_timeout: float = _knob(5.0, 0.001, 600)
    retry_max_attempts: int = _knob(6, 1, 100)
    retry_base_delay: float = _knob(0.05, 0.0, 60)
    retry_max_delay: float = _knob(2.0, 0.0, 600)

    # segments
    chunk_size: int = _knob(4 * MiB, 1 * KiB, 5 * GiB)
    merge_on_seal: bool = _knob(True)
    commit_log_max_size: int = _knob(1 * GiB, 1 * KiB, 5 * 10_000 * GiB)
    consume_queue_max_size: int = _knob(64 * MiB, 1 * KiB, 5 * 10_000 * GiB)
    rolling_interval: float = _knob(24 * 3600.0, 0.0, 365 * 24 * 3600.0)

    # fetcher
    readahead_chunk_num: int = _knob(2, 0, 64)
    readahead_chunk_max: int = _knob(8, 0, 256)
    readahead_drop_behind: bool = _knob(True)
    read_concurrency: int = _knob(16, 1, 1024)
    memory_cache_bytes: int = _knob(256 * MiB, 0, 1024 * GiB)
    disk_cache_bytes: int = _knob(0, 0, 100 * 1024 * GiB)
    disk_cache_path: str = _knob("")

    # upload buffer pool
    pool_bytes: int = _knob(64 * MiB, 1 * KiB, 1024 * GiB)
    group_commit_interval: float = _knob(0.2, 0.0, 3600)
    upload_concurrency: int = _knob(16, 1, 1024)

    # message store
    max_message_size: int = _knob(4 * MiB, 1, 1 * GiB)
    file_reserved_time: float = _knob(72 * 3600.0, 0.0, 100 * 365 * 24 * 3600.0)
    metadata_page_size: int = _knob(1000, 1, 1_000_000)
    gc_interval: float = _knob(3600.0, 0.0, 30 * 24 * 3600.0)
    gc_safety_age: float = _knob(3600.0, 0.0, 365 * 24 * 3600.0)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _check(f, getattr(self, f.name))
        if self.retry_base_delay > self.retry_max_delay:
            raise ConfigError(
                "retry_base_delay",
                f"must not exceed retry_max_delay={self.retry_max_delay}, "
                f"got {self.retry_base_delay}",
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
            raise ConfigError("chunk_size", f"must be a multiple of 1 KiB, got {self.chunk_size}")
        if self.backend == "s3" and not self.s3_bucket:
            raise ConfigError("s3_bucket", "is required when backend = 's3'")

    def replace(self, **changes: Any) -> TieredStoreConfig:
        """A copy with some keys changed (validated like any other)."""
        return dataclasses.replace(self, **{k: _coerce(k, v) for k, v in changes.items()})


def _check(f: dataclasses.Field[Any], value: Any) -> None:
    kind = f.type if isinstance(f.type, type) else {"int": int, "float": float, "bool": bool,
                                                     "str": str}[str(f.type)]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f.name, f"must be {kind.__name__}, got {value!r}")
    lo, hi, choices = f.metadata["lo"], f.metadata["hi"], f.metadata["choices"]
    if choices is not None and value not in choices:
        raise ConfigError(f.name, f"must be one of {', '.join(choices)}; got {value!r}")
    if lo is not None and hi is not None and not lo <= value <= hi:
        raise ConfigError(f.name, f"must be in [{lo:g}, {hi:g}], got {value!r}")


_FIELDS = {f.name: f for f in dataclasses.fields(TieredStoreConfig)}


def _coerce(key: str, value: Any) -> Any:
    """Turn a string (from the environment) or int (for a float) into the key's type."""
    f = _FIELDS.get(key)
    if f is None:
        raise ConfigError(key, f"unknown key; known keys are {', '.join(sorted(_FIELDS))}")
    kind = str(f.type)
    if isinstance(value, str) and kind != "str":
        text = value.strip()
        try:
            if kind == "bool":
                if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(text)
                return text.lower() in ("1", "true", "yes", "on")
            if kind == "int":
                return int(_parse_size(text))
            return float(text)
        except ValueError:
            raise ConfigError(key, f"cannot read {value!r} as {kind}") from None
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


_SIZE_SUFFIXES = {"k": KiB, "kib": KiB, "m": MiB, "mib": MiB, "g": GiB, "gib": GiB}


def _parse_size(text: str) -> int:
    """``4194304``, ``4MiB``, ``4m``, ``1_000``."""
    lowered = text.lower().replace("_", "")
    for suffix, factor in sorted(_SIZE_SUFFIXES.items(), key=lambda kv: -len(kv[0])):
        if lowered.endswith(suffix):
            return int(float(lowered[: -len(suffix)]) * factor)
    return int(lowered)


def _flatten(table: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """Keys may sit at the top or in one level of TOML tables ([s3], [fetcher]...)."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, path))
        else:
            flat[key] = value
    return flat


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> TieredStoreConfig:
    """Defaults < TOML file < ``TIEREDSTORE_*`` environment < ``overrides``."""
    values: dict[str, Any] = {}
    if path is not None:
        file = Path(path)
        try:
            with open(file, "rb") as fh:
                table = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError("--config", f"file {str(file)!r} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("--config", f"{file}: {exc}") from None
        for key, value in _flatten(table, file).items():
            values[key] = _coerce(key, value)
    environ = os.environ if env is None else env
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX):
            key = name[len(ENV_PREFIX) :].lower()
            if key in ("config",):
                continue
            values[key] = _coerce(key, value)
    for key, value in overrides.items():
        values[key] = _coerce(key, value)
    return TieredStoreConfig(**values)
