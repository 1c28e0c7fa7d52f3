"""Build the configured ObjectStore."""

from __future__ import annotations

from tieredstore.config import TieredStoreConfig
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.chokepoint import Chokepoint, RetryPolicy
from tieredstore.objectstore.local import LocalObjectStore
from tieredstore.objectstore.memory import MemoryObjectStore
from tieredstore.objectstore.s3 import S3ObjectStore, S3Settings


def chokepoint_for(config: TieredStoreConfig) -> Chokepoint:
    return Chokepoint(
        RetryPolicy(
            max_attempts=config.retry_max_attempts,
            base_delay=config.retry_base_delay,
            max_delay=config.retry_max_delay,
            timeout=config.request_timeout,
        )
    )


def open_object_store(config: TieredStoreConfig) -> ObjectStore:
    """The backend ``config.backend`` names, with the configured retry policy."""
    chokepoint = chokepoint_for(config)
    if config.backend == "memory":
        return MemoryObjectStore(chokepoint=chokepoint)
    if config.backend == "local":
        return LocalObjectStore(config.local_path, fsync=config.local_fsync, chokepoint=chokepoint)
    settings = S3Settings(
        bucket=config.s3_bucket,
        endpoint_url=config.s3_endpoint_url or None,
        region=config.s3_region or None,
        addressing_style=config.s3_addressing_style,
        access_key_id=config.s3_access_key_id or None,
        secret_access_key=config.s3_secret_access_key or None,
        connect_timeout=config.connect_timeout,
        read_timeout=config.request_timeout,
        max_pool_connections=config.s3_max_pool_connections,
    )
    return S3ObjectStore(settings, chokepoint=chokepoint)


async def prepare_bucket(store: ObjectStore, config: TieredStoreConfig) -> None:
    """Before a writer uses an S3 bucket: create it if ``s3_create_bucket`` asks,
    else make sure it exists (a misspelled bucket is an error naming it, never a
    new bucket)."""
    if not isinstance(store, S3ObjectStore):
        return
    if config.s3_create_bucket:
        await store.create_bucket()
    else:
        await store.check_bucket()
