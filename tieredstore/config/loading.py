"""Loading a configuration: defaults < TOML file < ``TIEREDSTORE_*`` environment
< keyword overrides, each value checked and its origin named in any error."""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tieredstore.config.coerce import coerce, near_miss
from tieredstore.config.model import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FIELDS,
    MIN_MESSAGE_SIZE,
    TieredStoreConfig,
)
from tieredstore.config.paths import check_paths
from tieredstore.config.reference import REFERENCE_FILE
from tieredstore.config.topics import TOPICS, merged, read_topics
from tieredstore.config.units import human_size
from tieredstore.errors import ConfigError

ENV_PREFIX = "TIEREDSTORE_"
# The one environment variable with the prefix that is not a key: the file's path.
ENV_NOT_KEYS = ("config",)
# What a ConfigError about the configuration file itself (not one of its keys) names.
FILE = "file"

log = logging.getLogger(__name__)


def _flatten(table: Mapping[str, Any], file: Path, where: str = "") -> dict[str, tuple[Any, str]]:
    """Keys may sit at the top or in TOML tables ([s3], [fetcher]...), each once.

    Tables only group keys, one level deep: a table in a table, or a top-level
    table named like ``topics`` (``[Topics]``), is an error. Otherwise a topic's
    table under a misspelled name (``[topic."audit"]``) would be flattened into
    the top level, its retention every topic's. Returns each key's value and the
    table it was found in.
    """
    flat: dict[str, tuple[Any, str]] = {}
    for key, value in table.items():
        if key == TOPICS:
            raise ConfigError(TOPICS, f"must be a top-level table ([topics.\"NAME\"]), not in "
                                      f"[{where}] of {file}")
        if isinstance(value, Mapping) and (where or near_miss([TOPICS], key.lower())):
            name = f"{where}.{key}" if where else key
            raise ConfigError(name,
                              f"[{name}] in {file}: tables only group keys, one level deep "
                              f"([s3], [pool]); a topic's keys go in a [topics.\"NAME\"] "
                              f"table")
        if isinstance(value, Mapping):
            found = _flatten(value, file, f"{where}.{key}" if where else key).items()
        else:
            found = {key: (value, f"[{where}]" if where else "the top level")}.items()
        for name, (item, place) in found:
            if name in flat:
                raise ConfigError(name, f"is set twice in {file}: in {flat[name][1]} and in "
                                        f"{place}")
            flat[name] = (item, place)
    return flat


def _read_file(path: str | os.PathLike[str]
               ) -> tuple[dict[str, tuple[Any, str]], dict[str, dict[str, Any]]]:
    """The file's keys (each with the table it is in) and its topics' tables."""
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(FILE, f"must be a path (str or PathLike), got "
                                f"{type(path).__name__}")
    file = Path(path)
    try:
        with open(file, "rb") as fh:
            table = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(FILE, f"{str(file)!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(FILE, f"{str(file)!r} is a directory, not a TOML file") \
            from None
    except UnicodeDecodeError as exc:
        raise ConfigError(FILE, f"{str(file)!r} is not a TOML file: not UTF-8 text "
                                f"(byte {exc.object[exc.start]:#04x} at offset "
                                f"{exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(FILE, f"{str(file)!r} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(FILE, f"cannot read {str(file)!r}: "
                                f"{exc.strerror or exc}") from None
    topics = read_topics(table.pop(TOPICS, {}), FIELDS, f"in {path}", written=True)
    return _flatten(table, file), topics


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    origins: Mapping[str, str] | None = None,
    **overrides: Any,
) -> TieredStoreConfig:
    """Defaults < TOML file < ``TIEREDSTORE_*`` environment < ``overrides``.

    An environment variable with the prefix that resembles a key (a
    misspelling: ``TIEREDSTORE_CHUNK_SIZ``) is an error naming it and the key;
    one that resembles none (``TIEREDSTORE_HOME``, a script's own variable) is
    logged as a warning naming it, and left out: an unrelated variable must not
    stop a broker. ``TIEREDSTORE_CONFIG`` (the file's path) is no key.
    Per-topic overrides (``[topics."NAME"]``, :mod:`~tieredstore.config.topics`)
    come from the file and from ``topics=`` in code. ``max_message_size``, when
    not set, is at most the commit-log segment size (every topic's) and the
    pool budget. A problem with the file itself (not a path, missing,
    unreadable, not TOML) raises a :class:`ConfigError` whose key is ``"file"``.
    An error about an override says where it came from: ``origins`` (key ->
    ``"given as --chunk-size"``, a command line's flag), else ``"given in code"``.
    """
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    file_topics: dict[str, dict[str, Any]] = {}

    def given(key: str, value: Any, where: str, *, written: bool = False) -> None:
        try:
            values[key] = coerce(FIELDS, key, value, written=written)
        except ConfigError as exc:
            raise ConfigError(exc.key, f"{exc.detail} ({where})") from None
        origin[key] = where

    if path is not None:
        keys, file_topics = _read_file(path)
        for key, (value, place) in keys.items():
            given(key, value, f"in {path}, {place}", written=True)
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
        if key not in FIELDS:
            _unknown_variable(name, key)
            continue
        given(key, value, f"from {name}")
    code_topics = read_topics(overrides.pop(TOPICS), FIELDS, "given in code", written=False) \
        if TOPICS in overrides else {}
    for key, value in overrides.items():
        given(key, value, (origins or {}).get(key, "given in code"))
    values[TOPICS] = topics = merged(file_topics, code_topics)
    if "max_message_size" not in values:
        default = DEFAULT_MAX_MESSAGE_SIZE
        limits = [values.get(k) for k in ("commit_log_max_size", "pool_bytes")]
        limits += [dict(t.values).get("commit_log_max_size") for t in topics]
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


def _unknown_variable(name: str, key: str) -> None:
    """``TIEREDSTORE_<KEY>`` variables are keys: one that resembles a key is a
    misspelling and an error (never ignored); one that resembles none is
    logged as a warning and left out."""
    if key == TOPICS:
        raise ConfigError(key, f"{name}: per-topic overrides are set in the configuration "
                               f"file, as [topics.\"NAME\"] tables, or with topics= in code")
    near = near_miss(FIELDS, key, cutoff=0.6)
    if near is None:
        log.warning("%s names no configuration key and resembles none: left out "
                    "(%s lists every key)", name, REFERENCE_FILE)
        return
    raise ConfigError(key, f"{name} names no key; did you mean {near!r} "
                           f"({ENV_PREFIX}{near.upper()})? Every {ENV_PREFIX}* variable that "
                           f"resembles a key is read as one")
