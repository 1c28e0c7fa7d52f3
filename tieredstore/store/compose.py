"""From the configuration to each layer's own options: the one place keys map to layers.

Below :mod:`tieredstore.store` nothing reads :class:`TieredStoreConfig`. Each
layer takes its own frozen options, which check their own fields (naming the
configuration key in a :class:`ConfigError`) and own their defaults (the
configuration's defaults are theirs):

- the object store: :class:`ObjectStoreOptions`, with its :class:`RetryPolicy`
  (the chokepoint's retries and timeout) and, for S3, :class:`S3Settings`;
- the fetcher: :class:`FetcherOptions`, and a :class:`DiskTier` when on;
- the upload buffer pool: :class:`PoolOptions` (it has no retry keys: the
  chokepoint retries, a failed commit waits for the next flush);
- a segment: :class:`SegmentOptions`;
- queue metadata: the page size, passed to ``QueueMetadata.open``.

The functions here build them from a configuration; the message store, the
command line and the Spark jobs open what they need through them.
"""

from __future__ import annotations

import logging
import os

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.fetcher.disk import DiskTier, DiskTierUnavailable
from tieredstore.fetcher.fetcher import Fetcher, FetcherOptions
from tieredstore.log import LogOptions
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.chokepoint import RetryPolicy
from tieredstore.objectstore.factory import ObjectStoreOptions, open_backend
from tieredstore.objectstore.factory import prepare_bucket as prepare_backend
from tieredstore.objectstore.local import LocalObjectStore
from tieredstore.objectstore.s3 import S3Settings
from tieredstore.segment.chunked import SegmentOptions
from tieredstore.segment.pool import PoolOptions, UploadBufferPool

log = logging.getLogger(__name__)

__all__ = [
    "disk_tier",
    "fetcher_options",
    "log_options",
    "object_store_options",
    "open_fetcher",
    "open_object_store",
    "open_pool",
    "pool_options",
    "prepare_bucket",
    "retry_policy",
    "s3_settings",
    "segment_options",
]


# --- object store ------------------------------------------------------------------


def retry_policy(config: TieredStoreConfig) -> RetryPolicy:
    """The chokepoint's retries (``retry_*``) and per-attempt ``request_timeout``."""
    return RetryPolicy(
        max_attempts=config.retry_max_attempts,
        base_delay=config.retry_base_delay,
        max_delay=config.retry_max_delay,
        timeout=config.request_timeout,
    )


def s3_settings(config: TieredStoreConfig) -> S3Settings:
    """The bucket and how to reach it (``s3_*``, ``connect_timeout``, ``request_timeout``)."""
    return S3Settings(
        bucket=config.s3_bucket,
        endpoint_url=config.s3_endpoint_url or None,
        region=config.s3_region or None,
        addressing_style=config.s3_addressing_style,
        access_key_id=config.s3_access_key_id or None,
        secret_access_key=config.s3_secret_access_key or None,
        connect_timeout=config.connect_timeout,
        read_timeout=config.request_timeout,
        max_pool_connections=config.s3_max_pool_connections,
        sse=config.s3_sse,
        sse_kms_key_id=config.s3_sse_kms_key_id or None,
        sse_kms_context=config.s3_sse_kms_context or None,
    )


def object_store_options(config: TieredStoreConfig) -> ObjectStoreOptions:
    """The backend ``config.backend`` names, where it is, and its retry policy."""
    return ObjectStoreOptions(
        backend=config.backend,
        local_path=config.local_path,
        local_fsync=config.local_fsync,
        s3=s3_settings(config) if config.backend == "s3" else None,
        create_bucket=config.s3_create_bucket,
        retry=retry_policy(config),
    )


def open_object_store(config: TieredStoreConfig) -> ObjectStore:
    """The configured backend, with the configured retry policy."""
    return open_backend(object_store_options(config))


def holds_local_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory the local backend was opened on."""
    return LocalObjectStore.holds_store(path)


async def prepare_bucket(store: ObjectStore, config: TieredStoreConfig) -> None:
    """Before a writer uses an S3 bucket: create it if ``s3_create_bucket`` asks,
    else make sure it exists (a misspelled bucket is an error naming it)."""
    await prepare_backend(store, create=config.s3_create_bucket)


# --- fetcher -------------------------------------------------------------------------


def fetcher_options(config: TieredStoreConfig) -> FetcherOptions:
    """The ``[fetcher]`` keys: memory tier, read-ahead window, GETs in flight."""
    return FetcherOptions(
        memory_bytes=config.memory_cache_bytes,
        readahead_chunk_num=config.readahead_chunk_num,
        readahead_chunk_max=config.readahead_chunk_max,
        drop_behind=config.readahead_drop_behind,
        read_concurrency=config.read_concurrency,
    )


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
    return PoolOptions(
        budget_bytes=config.pool_bytes,
        chunk_size=config.chunk_size,
        group_commit_interval=config.group_commit_interval,
        chunk_wait=config.chunk_wait,
        thread_handoff=THREAD_HANDOFF if threads else 0.0,
        upload_concurrency=config.upload_concurrency,
    )


# A thread waiting for the GIL wakes and takes it within about 20-50 us of its
# release; appending 1 KiB messages, 1 MiB takes about 3 ms: a 1.5% pause that
# made append_batch's flushes on the local directory about 25% sooner
# (bench/append.py; the commits' puts stopped lagging the appends).
THREAD_HANDOFF = 50e-6


def open_pool(config: TieredStoreConfig, store: ObjectStore) -> UploadBufferPool:
    """An upload buffer pool with :func:`pool_options`, for ``store``'s segments."""
    return UploadBufferPool(pool_options(config, threads=store.runs_in_threads))


def segment_options(config: TieredStoreConfig) -> SegmentOptions:
    """How the store's segments write: ``chunk_size`` and ``merge_on_seal``."""
    return SegmentOptions(chunk_size=config.chunk_size, merge_on_seal=config.merge_on_seal)


def log_options(config: TieredStoreConfig) -> LogOptions:
    """How the log mode batches, consolidates, compacts and deletes: ``log_*``, and
    ``gc_safety_age`` before a spent log object goes."""
    return LogOptions(object_size=config.log_object_size, compact_age=config.log_compact_age,
                      delete_age=config.gc_safety_age,
                      consolidate_interval=config.log_consolidate_interval,
                      consolidate_bytes=config.log_consolidate_bytes,
                      compact_bytes=config.log_compact_bytes,
                      hold_bytes=config.log_hold_bytes)
