"""Reader and job options: which store, how to split the read.

Store options map onto :func:`tieredstore.config.load_config` overrides, so
every config key may be given by its own name (``s3_bucket``, ``chunk_size``,
``read_concurrency``...) and a few by a short alias (``path``, ``bucket``,
``endpoint``...). The config is resolved once, where the read is planned, and
travels to executors as it is (a frozen dataclass pickles): they read neither
files nor ``TIEREDSTORE_*`` variables, so every task sees the same store. S3
credentials that boto3's chain resolves where the config is resolved (``AWS_*``
variables, a profile, ``~/.aws``) travel in it too, as configured ones do
(docs/spark-shipping.md, "Credentials"); an instance's or container's role does
not (each executor resolves its own). A
DataSource's options are resolved in the Python process Spark starts to plan
the read (the JVM's environment); the jobs resolve theirs in this process and
read through a format bound to the result (:mod:`tieredstore.spark.read.bound`). A
local store's path is made absolute where it is resolved, and must hold a store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from tieredstore import sync
from tieredstore.config import KEYS, REFERENCE_FILE, TieredStoreConfig, load_config, near_miss
from tieredstore.errors import ConfigError
from tieredstore.store import (
    ObjectStore,
    carrying_credentials,
    holds_local_store,
    open_object_store,
)

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
    "session_token": "s3_session_token",
}
SELECTION_OPTIONS = frozenset({"broker", "topic", "queue_id", "offset_from", "offset_to",
                               "time_from", "time_to", "queue_offsets"})
READER_OPTIONS = frozenset({"config", "messages_per_partition", "batch_rows", "pushdown"})

T = TypeVar("T")


def check_known(options: Mapping[str, str], own: frozenset[str]) -> None:
    """Every option (in lower case) is a config key, an alias of one, ``config``,
    a reader's split option or one of ``own`` (the reader's selection); else a
    :class:`ConfigError` naming it and the known option it most resembles."""
    known = KEYS | ALIASES.keys() | READER_OPTIONS | own
    for key in sorted(options.keys() - known):
        near = near_miss(known, key, cutoff=0.6)
        hint = (f"did you mean {near!r}?" if near is not None else
                f"the options are the config keys ({REFERENCE_FILE} lists them), "
                f"{', '.join(ALIASES)} and {', '.join(sorted(READER_OPTIONS | own))}")
        raise ConfigError(key, f"unknown option; {hint}")


def config_from_options(options: Mapping[str, str], *,
                        skip: frozenset[str] = SELECTION_OPTIONS) -> TieredStoreConfig:
    """The store config that reader options (any case) describe (``config``: a TOML
    file); ``skip``: the reader's own options, not config keys. An option that is
    neither is an error (:func:`check_known`)."""
    options = lower_options(options)
    check_known(options, skip)
    overrides: dict[str, Any] = {ALIASES.get(key, key): value for key, value in options.items()
                                 if key not in skip and key not in READER_OPTIONS}
    if "local_path" in overrides and "backend" not in overrides:
        overrides["backend"] = "local"
    return readable(load_config(options.get("config") or None, **overrides))


def readable(config: TieredStoreConfig) -> TieredStoreConfig:
    """``config`` as Spark reads it: refused for the memory backend; a local
    store's path made absolute and seen to hold a store (:func:`local_store_path`);
    an S3 store without credentials of its own given those boto3's chain resolves
    here (:func:`tieredstore.store.carrying_credentials`): the executors, whose
    environment is not this one, read with them."""
    if config.backend == "memory":
        raise ConfigError("backend", "a memory store lives in one process; Spark reads "
                          "'local' (a directory every executor sees) or 's3'")
    if config.backend == "local":
        config = dataclasses.replace(config, local_path=local_store_path(config.local_path))
    return carrying_credentials(config)


def local_store_path(path: str) -> str:
    """``path`` made absolute here, on the driver (an executor's working directory
    is its own), once it is seen to hold a local store: an executor opening a
    directory without one would create an empty store and read nothing."""
    where = Path(path).expanduser().absolute()
    if not where.is_dir():
        raise ConfigError("path", f"{path!r} ({where}) is not a directory: no store to read")
    if not holds_local_store(where):
        raise ConfigError("path", f"{path!r} ({where}) holds no tieredstore local store "
                          "(no 'objects' directory in it)")
    return str(where)


def on_store(config: TieredStoreConfig, work: Callable[[ObjectStore], Awaitable[T]]) -> T:
    """Run ``work`` on a store of its own, closed after, from sync code (the
    driver's planning, a task on an event loop of its own)."""

    async def run() -> T:
        async with open_object_store(config) as store:
            return await work(store)

    return sync.run(run())


def int_option(options: Mapping[str, str], key: str, default: int, lo: int = 0) -> int:
    """Option ``key`` (of options in lower case) as an int of at least ``lo``."""
    text = options.get(key)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(key, f"must be an integer, got {text!r}") from None
    if value < lo:
        raise ConfigError(key, f"must be >= {lo}, got {value}")
    return value


def lower_options(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}
