"""Configuration keys onto each layer's own options (``config.options``), one
default per setting, and the composition module's entry points over them."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tieredstore.config import KiB, MiB, TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.fetcher.fetcher import FetcherOptions
from tieredstore.log import LogOptions
from tieredstore.metadata import DEFAULT_PAGE_SIZE
from tieredstore.objectstore import (
    LocalObjectStore,
    MemoryObjectStore,
    RetryPolicy,
    S3ObjectStore,
    S3Settings,
)
from tieredstore.objectstore.factory import ObjectStoreOptions, open_backend
from tieredstore.segment import SegmentOptions
from tieredstore.segment.pool import PoolOptions
from tieredstore.store.base import compose

S3 = {"backend": "s3", "s3_bucket": "bkt", "s3_endpoint_url": "http://localhost:1",
      "s3_region": "eu-west-1", "s3_addressing_style": "path", "s3_access_key_id": "id",
      "s3_secret_access_key": "s3cr3t-value", "s3_max_pool_connections": 7, "connect_timeout": 1.5,
      "request_timeout": 9.0, "s3_create_bucket": True}


# --- one default per setting ---------------------------------------------------------


def test_the_configurations_defaults_are_the_layers_own() -> None:
    config = TieredStoreConfig()
    assert config.options(RetryPolicy) == RetryPolicy()
    assert compose.object_store_options(config) == ObjectStoreOptions()
    assert compose.fetcher_options(config) == FetcherOptions()
    assert compose.pool_options(config) == PoolOptions()
    assert config.options(SegmentOptions) == SegmentOptions()
    assert config.options(LogOptions) == LogOptions()
    assert config.metadata_page_size == DEFAULT_PAGE_SIZE == 64
    assert compose.disk_tier(config) is None


# --- object store -------------------------------------------------------------------


def test_object_store_options_take_the_backend_and_retry_keys(tmp_path: Path) -> None:
    config = TieredStoreConfig(backend="local", local_path=str(tmp_path), local_fsync=False,
                               retry_max_attempts=3, retry_base_delay=0.01,
                               retry_max_delay=0.5, request_timeout=7.0)
    options = compose.object_store_options(config)
    assert options.retry == RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.5,
                                        timeout=7.0)
    assert (options.backend, options.local_path, options.local_fsync, options.s3) == (
        "local", str(tmp_path), False, None)
    store = compose.open_object_store(config)
    assert isinstance(store, LocalObjectStore) and store.fsync is False
    assert store.chokepoint.policy == options.retry
    assert isinstance(compose.open_object_store(config.replace(backend="memory")),
                      MemoryObjectStore)


def test_s3_settings_take_the_s3_keys() -> None:
    config = TieredStoreConfig(**S3)
    options = compose.object_store_options(config)
    assert options.create_bucket is True and options.s3 is not None
    s3 = options.s3
    assert (s3.bucket, s3.endpoint_url, s3.region, s3.addressing_style, s3.access_key_id,
            s3.secret_access_key, s3.connect_timeout, s3.read_timeout,
            s3.max_pool_connections) == ("bkt", "http://localhost:1", "eu-west-1", "path", "id",
                                         "s3cr3t-value", 1.5, 9.0, 7)
    store = open_backend(options)
    assert isinstance(store, S3ObjectStore) and store.settings == s3
    assert "s3cr3t-value" not in repr(options)
    # an empty text key is unset: the field's default (None), not ""
    assert TieredStoreConfig(backend="s3", s3_bucket="b").options(S3Settings) == \
        S3Settings(bucket="b")


def test_object_store_options_check_their_fields_and_name_the_config_key() -> None:
    for bad, key in (({"backend": "ftp"}, "backend"), ({"backend": "s3"}, "s3_bucket"),
                     ({"local_path": ""}, "local_path")):
        with pytest.raises(ConfigError) as info:
            ObjectStoreOptions(**bad)  # type: ignore[arg-type]
        assert info.value.key == key


# --- fetcher, pool, segments ---------------------------------------------------------------


async def test_the_fetcher_takes_the_fetcher_keys_and_the_disk_tier(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    config = TieredStoreConfig(memory_cache_bytes=3 * MiB, readahead_chunk_num=1,
                               readahead_chunk_max=4, read_concurrency=2,
                               readahead_drop_behind=False,
                               disk_cache_bytes=8 * MiB, disk_cache_path=str(tmp_path / "d"))
    async with compose.open_fetcher(store, config) as fetcher:
        assert fetcher.options == FetcherOptions(memory_bytes=3 * MiB, readahead_chunk_num=1,
                                                 readahead_chunk_max=4, read_concurrency=2,
                                                 drop_behind=False)
        assert fetcher.memory.budget == 3 * MiB
        assert fetcher.disk is not None and fetcher.disk.size_limit == 8 * MiB
    async with compose.open_fetcher(store, TieredStoreConfig()) as fetcher:
        assert fetcher.disk is None
    config = TieredStoreConfig(disk_cache_bytes=MiB, local_path=str(tmp_path / "data"))
    async with compose.open_fetcher(store, config) as fetcher:
        assert fetcher.disk is not None
    assert (tmp_path / "data" / "cache").is_dir()


def test_pool_options_take_the_pool_keys() -> None:
    config = TieredStoreConfig(pool_bytes=8 * MiB, chunk_size=1 * MiB, group_commit_interval=0.5,
                               upload_concurrency=3, retry_max_attempts=4,
                               max_message_size=1 * MiB)
    assert compose.pool_options(config) == PoolOptions(
        budget_bytes=8 * MiB, chunk_size=1 * MiB, group_commit_interval=0.5,
        upload_concurrency=3)
    assert compose.open_pool(config, MemoryObjectStore()).options == compose.pool_options(config)


def test_a_pool_over_a_store_of_worker_threads_hands_them_the_gil(tmp_path: Path) -> None:
    config = TieredStoreConfig()
    local = compose.open_pool(config, LocalObjectStore(tmp_path / "data")).options
    assert local.thread_handoff == compose.THREAD_HANDOFF > 0
    assert compose.open_pool(config, MemoryObjectStore()).options.thread_handoff == 0


def test_pool_options_refuse_a_budget_below_the_largest_message() -> None:
    config = TieredStoreConfig(pool_bytes=1 * MiB, max_message_size=4 * MiB)
    with pytest.raises(ConfigError, match="pool_bytes"):
        compose.pool_options(config)


def test_log_options_take_the_log_keys_and_the_gc_safety_age() -> None:
    config = TieredStoreConfig(log_object_size=2 * MiB, log_compact_age=60.0,
                               gc_safety_age=120.0, log_consolidate_interval=5.0,
                               log_consolidate_bytes=3 * MiB, log_compact_bytes=4 * MiB,
                               log_hold_bytes=5 * MiB)
    assert config.options(LogOptions) == LogOptions(
        object_size=2 * MiB, compact_age=60.0, delete_age=120.0, consolidate_interval=5.0,
        consolidate_bytes=3 * MiB, compact_bytes=4 * MiB, hold_bytes=5 * MiB)


def test_segment_options_take_the_chunk_size_and_merge_on_seal() -> None:
    config = TieredStoreConfig(chunk_size=64 * KiB, merge_on_seal=False)
    assert config.options(SegmentOptions) == SegmentOptions(chunk_size=64 * KiB,
                                                            merge_on_seal=False)


# --- credentials carried to processes elsewhere (Spark's executors) ----------------


@pytest.fixture
def no_chain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """boto3's chain with nothing to find: no AWS_* credentials, no files."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    return monkeypatch


def test_credentials_the_chain_resolves_are_carried_in_the_configuration(
        no_chain: pytest.MonkeyPatch) -> None:
    no_chain.setenv("AWS_ACCESS_KEY_ID", "AKIACHAIN")
    no_chain.setenv("AWS_SECRET_ACCESS_KEY", "chain-secret-value")
    no_chain.setenv("AWS_SESSION_TOKEN", "chain-token-value")
    config = compose.carrying_credentials(TieredStoreConfig(backend="s3", s3_bucket="b"))
    s3 = config.options(S3Settings)
    assert (s3.access_key_id, s3.secret_access_key, s3.session_token) == (
        "AKIACHAIN", "chain-secret-value", "chain-token-value")
    for shown in (repr(config), str(config), repr(s3)):
        assert "chain-secret-value" not in shown and "chain-token-value" not in shown, shown
    assert "s3_session_token='<redacted>'" in repr(config)
    # configured keys win; a local store carries nothing
    configured = TieredStoreConfig(**S3)
    assert compose.carrying_credentials(configured) is configured
    local = TieredStoreConfig(backend="memory")
    assert compose.carrying_credentials(local) is local


def test_a_profiles_credentials_are_carried_and_nothing_found_changes_nothing(
        no_chain: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bare = TieredStoreConfig(backend="s3", s3_bucket="b")
    assert compose.carrying_credentials(bare) is bare
    (tmp_path / "credentials").write_text("[reader]\naws_access_key_id = AKIAPROFILE\n"
                                          "aws_secret_access_key = profile-secret\n")
    no_chain.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    no_chain.setenv("AWS_PROFILE", "reader")
    config = compose.carrying_credentials(bare)
    assert (config.s3_access_key_id, config.s3_secret_access_key, config.s3_session_token) == (
        "AKIAPROFILE", "profile-secret", "")


def test_an_instance_role_is_neither_looked_for_nor_carried(no_chain: pytest.MonkeyPatch
                                                            ) -> None:
    """The platform's credentials stay the platform's: with metadata lookups
    allowed, pointed at a server that never answers (botocore's chain waits for
    it 2 s a try), resolving finds nothing at once."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        no_chain.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
        no_chain.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT",
                        f"http://127.0.0.1:{silent.getsockname()[1]}/")
        no_chain.setenv("AWS_METADATA_SERVICE_TIMEOUT", "2")
        started = time.monotonic()
        bare = TieredStoreConfig(backend="s3", s3_bucket="b")
        assert compose.carrying_credentials(bare) is bare
        assert time.monotonic() - started < 1.0
