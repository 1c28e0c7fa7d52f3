"""Reader and job options: which store, how to split the read.

Store options map onto :func:`tieredstore.config.load_config` overrides, so
every config key may be given by its own name (``s3_bucket``, ``chunk_size``,
``read_concurrency``...) and a few by a short alias (``path``, ``bucket``,
``endpoint``...). The config is resolved once, on the driver, and travels to
executors as plain values: they read neither files nor ``TIEREDSTORE_*``
variables, so every task sees the same store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import ConfigError

FORMAT_NAME = "tieredstore"

ALIASES = {
    "path": "local_path",
    "bucket": "s3_bucket",
    "endpoint": "s3_endpoint_url",
    "endpoint_url": "s3_endpoint_url",
    "region": "s3_region",
    "addressing_style": "s3_addressing_style",
    "access_key_id": "s3_access_key_id",
    "secret_access_key": "s3_secret_access_key",
}
SELECTION_OPTIONS = frozenset({"topic", "queue_id", "offset_from", "offset_to", "time_from",
                               "time_to"})
READER_OPTIONS = frozenset({"config", "messages_per_partition", "batch_rows", "pushdown"})

ConfigValues = dict[str, Any]


def config_from_options(options: Mapping[str, str]) -> TieredStoreConfig:
    """The store config that reader options describe (``config``: a TOML file)."""
    overrides: dict[str, Any] = {}
    for name, value in options.items():
        key = name.lower()
        if key in SELECTION_OPTIONS or key in READER_OPTIONS:
            continue
        overrides[ALIASES.get(key, key)] = value
    if "local_path" in overrides and "backend" not in overrides:
        overrides["backend"] = "local"
    config = load_config(_option(options, "config") or None, **overrides)
    if config.backend == "memory":
        raise ConfigError("backend", "a memory store lives in one process; Spark reads "
                          "'local' (a directory every executor sees) or 's3'")
    return config


def config_values(config: TieredStoreConfig) -> ConfigValues:
    """Plain values of a config, to pickle to executors."""
    return dataclasses.asdict(config)


def config_of(values: ConfigValues) -> TieredStoreConfig:
    return TieredStoreConfig(**values)


def int_option(options: Mapping[str, str], key: str, default: int, lo: int = 0) -> int:
    text = _option(options, key)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(key, f"must be an integer, got {text!r}") from None
    if value < lo:
        raise ConfigError(key, f"must be >= {lo}, got {value}")
    return value


def _option(options: Mapping[str, str], key: str) -> str | None:
    for name, value in options.items():
        if name.lower() == key:
            return value
    return None


def lower_options(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}
