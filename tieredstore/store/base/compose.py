"""From the configuration to each layer's own objects.

Below :mod:`tieredstore.store` nothing reads :class:`TieredStoreConfig`. Each
layer takes its own frozen options, which check their own fields (naming the
configuration key in a :class:`ConfigError`) and own their defaults: each key
says which options fields it sets (``config/model.py``), and
``config.options(Kind)`` builds them (the object store's :class:`RetryPolicy`,
:class:`GovernorOptions`, :class:`S3Settings` and :class:`ObjectStoreOptions`, the fetcher's
:class:`FetcherOptions`, :class:`PoolOptions`, :class:`SegmentOptions`,
:class:`LogOptions`). Queue metadata takes its page size, passed to
``QueueMetadata.open``.

The functions here open what the message store, the command line and the
Spark jobs need from a configuration, and add what no single key says.
"""

from __future__ import annotations

import logging
import os

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.fetcher.disk import DiskTier, DiskTierUnavailable
from tieredstore.fetcher.fetcher import Fetcher, FetcherOptions
from tieredstore.objectstore.backends.local import LocalObjectStore
from tieredstore.objectstore.backends.s3 import S3Settings
from tieredstore.objectstore.backends.s3_settings import chain_credentials
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.chokepoint import RetryPolicy
from tieredstore.objectstore.factory import ObjectStoreOptions, open_backend
from tieredstore.objectstore.factory import prepare_bucket as prepare_backend
from tieredstore.objectstore.governor import GovernorOptions, Prices
from tieredstore.segment.pool import PoolOptions, UploadBufferPool

log = logging.getLogger(__name__)

__all__ = [
    "carrying_credentials",
    "disk_tier",
    "fetcher_options",
    "object_store_options",
    "open_fetcher",
    "open_object_store",
    "open_pool",
    "pool_options",
    "prepare_bucket",
    "request_prices",
]


# --- object store ------------------------------------------------------------------


def object_store_options(config: TieredStoreConfig) -> ObjectStoreOptions:
    """The backend ``config.backend`` names, where it is, its retry policy and its
    request governor, whose prefixes are the ``key_prefix`` and the hash after it."""
    depth = len([part for part in config.key_prefix.split("/") if part]) + 1
    return config.options(ObjectStoreOptions, retry=config.options(RetryPolicy),
                          governor=config.options(GovernorOptions, prefix_depth=depth),
                          s3=config.options(S3Settings) if config.backend == "s3" else None)


def open_object_store(config: TieredStoreConfig) -> ObjectStore:
    """The configured backend, with the configured retry policy."""
    return open_backend(object_store_options(config))


def request_prices(config: TieredStoreConfig) -> Prices:
    """What requests cost at ``config``'s prices: the governor's dollar budget and
    the cost metric use these."""
    return config.options(GovernorOptions).prices


def carrying_credentials(config: TieredStoreConfig) -> TieredStoreConfig:
    """``config`` with the S3 credentials boto3's chain resolves in this process
    written into its keys (``s3_access_key_id``, ``s3_secret_access_key``,
    ``s3_session_token``), for a process that opens the store elsewhere, with an
    environment of its own (a Spark executor): when the backend is S3 and no key
    id is configured, and the chain finds credentials other than the platform's
    (``s3_settings.chain_credentials``). Otherwise ``config`` as it is. The
    copy is a snapshot: temporary credentials are not refreshed in it."""
    if config.backend != "s3" or config.s3_access_key_id:
        return config
    found = chain_credentials()
    if found is None:
        return config
    return config.replace(s3_access_key_id=found.access_key_id,
                          s3_secret_access_key=found.secret_access_key,
                          s3_session_token=found.session_token)


def holds_local_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory the local backend was opened on."""
    return LocalObjectStore.holds_store(path)


async def prepare_bucket(store: ObjectStore, config: TieredStoreConfig) -> None:
    """Before a writer uses an S3 bucket: create it if ``s3_create_bucket`` asks,
    else make sure it exists (a misspelled bucket is an error naming it); and
    that the server honours conditional creates (checked once per key prefix)."""
    await prepare_backend(store, create=config.s3_create_bucket, prefix=config.key_prefix,
                          accept_ignored_if_none_match=config.s3_accept_ignored_if_none_match)


# --- fetcher -------------------------------------------------------------------------


def fetcher_options(config: TieredStoreConfig) -> FetcherOptions:
    """The ``[fetcher]`` keys: memory tier, read-ahead window, GETs in flight."""
    return config.options(FetcherOptions)


def disk_tier(config: TieredStoreConfig) -> DiskTier | None:
    """The disk tier when ``disk_cache_bytes`` > 0: in ``disk_cache_path`` or, when
    that is empty, in ``<local_path>/cache``. It is a cache: one that cannot be
    opened (a full disk) is left out with a warning, unless ``disk_cache_required``."""
    if config.disk_cache_bytes <= 0:
        return None
    path = config.disk_cache_path or os.path.join(config.local_path, "cache")
    try:
        return DiskTier(path, config.disk_cache_bytes)
    except DiskTierUnavailable as exc:
        if config.disk_cache_required:
            key = "disk_cache_path" if config.disk_cache_path else "local_path"
            raise ConfigError(key, f"{exc} (disk_cache_required is on)") from exc
        log.warning("%s: reading without the disk cache (from memory and the store); "
                    "set disk_cache_required to make this an error", exc)
        return None


def open_fetcher(store: ObjectStore, config: TieredStoreConfig) -> Fetcher:
    """A fetcher over ``store`` with the ``[fetcher]`` keys and the disk tier, if on."""
    return Fetcher(store, fetcher_options(config), disk=disk_tier(config))


# --- upload buffer pool and segments --------------------------------------------------------


def pool_options(config: TieredStoreConfig, *, threads: bool = False) -> PoolOptions:
    """The ``[pool]`` keys and ``chunk_size``; ``threads``: the object store runs
    its requests in worker threads (:data:`THREAD_HANDOFF`). Refuses a budget
    smaller than the largest message, which could never be admitted."""
    if config.max_message_size > config.pool_bytes:
        raise ConfigError(
            "pool_bytes",
            f"must be at least max_message_size={config.max_message_size}, "
            f"got {config.pool_bytes}",
        )
    return config.options(PoolOptions, thread_handoff=THREAD_HANDOFF if threads else 0.0)


# A thread waiting for the GIL wakes and takes it within about 20-50 us of its
# release; appending 1 KiB messages, 1 MiB takes about 3 ms: a 1.5% pause that
# made append_batch's flushes on the local directory about 25% sooner
# (bench/store/append.py; the commits' puts stopped lagging the appends).
THREAD_HANDOFF = 50e-6


def open_pool(config: TieredStoreConfig, store: ObjectStore) -> UploadBufferPool:
    """An upload buffer pool with :func:`pool_options`, for ``store``'s segments."""
    return UploadBufferPool(pool_options(config, threads=store.runs_in_threads))
