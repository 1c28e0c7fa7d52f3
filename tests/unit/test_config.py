"""Configuration: precedence, validation naming the key, and the documented file."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tieredstore.config import REFERENCE_FILE, TieredStoreConfig, load_config
from tieredstore.errors import ConfigError
from tieredstore.fetcher.options import FetcherOptions
from tieredstore.ledger.managed.config import ManagedLedgerConfig
from tieredstore.log.options import LogOptions
from tieredstore.objectstore.chokepoint import RetryPolicy
from tieredstore.segment.options import SegmentOptions
from tieredstore.segment.pool.options import PoolOptions

CONF = REFERENCE_FILE


def test_the_shipped_file_documents_every_key_with_its_default() -> None:
    text = CONF.read_text()
    table = tomllib.loads(text)
    flat = {k: v for section in table.values() for k, v in section.items()}
    names = {f.name for f in dataclasses.fields(TieredStoreConfig)} - {"topics"}
    assert set(flat) == names, f"undocumented: {names - set(flat)}, unknown: {set(flat) - names}"
    assert load_config(CONF, env={}) == TieredStoreConfig(), "file defaults differ from code"
    for name in names:  # each key has a comment line right above it (or its group)
        assert re.search(rf"#[^\n]*\n(?:[a-z_0-9]+ = [^\n]*\n)*{name} = ", text), name


def test_precedence_file_then_env_then_code(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('chunk_size = "16MiB"\nreadahead_chunk_num = 3\n')
    env = {"TIEREDSTORE_READAHEAD_CHUNK_NUM": "5", "TIEREDSTORE_POOL_BYTES": "1MiB"}
    config = load_config(conf, env=env, pool_bytes=2 * 1024 * 1024)
    assert config.chunk_size == 16 * 1024 * 1024
    assert config.readahead_chunk_num == 5
    assert config.pool_bytes == 2 * 1024 * 1024


@pytest.mark.parametrize(
    ("overrides", "key", "text"),
    [
        ({"chunk_size": 10}, "chunk_size", "must be in [1 KiB, 5 GiB], got 10 B"),
        ({"backend": "ftp"}, "backend", "one of local, s3, memory"),
        ({"readahead_chunk_num": 9, "readahead_chunk_max": 8}, "readahead_chunk_num",
         "must not exceed readahead_chunk_max"),
        ({"backend": "s3"}, "s3_bucket", "required"),
        ({"no_such_key": 1}, "no_such_key", "unknown key"),
        ({"local_fsync": "maybe"}, "local_fsync", "cannot read"),
        ({"request_timeout": -1.0}, "request_timeout", "must be in"),
    ],
)
def test_bad_values_name_the_key_and_the_allowed_range(
    overrides: dict[str, object], key: str, text: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env={}, **overrides)
    assert info.value.key == key
    assert text in str(info.value)


def test_bad_environment_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match="chunk_size"):
        load_config(env={"TIEREDSTORE_CHUNK_SIZE": "lots"})


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", env={})


def test_chunk_size_must_not_cut_consume_queue_units() -> None:
    with pytest.raises(ConfigError, match="multiple of 1 KiB") as info:
        load_config(env={}, chunk_size=4 * 1024 * 1024 + 16)
    assert info.value.key == "chunk_size"


@pytest.mark.parametrize(("make", "key"), [
    (lambda v: FetcherOptions(read_concurrency=v), "read_concurrency"),
    (lambda v: SegmentOptions(max_size=v), "max_size"),
    (lambda v: PoolOptions(chunk_wait=v), "chunk_wait"),
    (lambda v: LogOptions(linger=v), "linger"),
    (lambda v: LogOptions(compact_bytes=v), "log_compact_bytes"),
    (lambda v: ManagedLedgerConfig(retention_seconds=v), "retention_seconds"),
    (lambda v: RetryPolicy(max_attempts=v), "retry_max_attempts"),
])
@pytest.mark.parametrize("value", [float("nan"), True, "3", -1])
def test_every_options_class_refuses_a_bad_bound_naming_its_key(
        make: Callable[[Any], object], key: str, value: object) -> None:
    """One bound check for all options classes: not a number, a bool, NaN or
    out of range is a ConfigError that names the key, the bounds and the value."""
    with pytest.raises(ConfigError) as info:
        make(value)
    assert info.value.key == key and f"got {value!r}" in str(info.value)


@pytest.mark.parametrize(("make", "key"), [
    (lambda: FetcherOptions(read_concurrency=None), "read_concurrency"),
    (lambda: PoolOptions(budget_bytes=None), "pool_bytes"),
    (lambda: PoolOptions(low_water=None), "low_water"),
    (lambda: RetryPolicy(max_attempts=None), "retry_max_attempts"),
    (lambda: ManagedLedgerConfig(deletion_lag_seconds=None), "deletion_lag_seconds"),
])
def test_a_required_option_left_none_is_refused_naming_its_key(
        make: Callable[[], object], key: str) -> None:
    """None means "unset" only where a field may be unset (``max_size``,
    ``max_ledger_bytes``, offload and retention thresholds)."""
    with pytest.raises(ConfigError) as info:
        make()
    assert info.value.key == key and "got None" in str(info.value)
    SegmentOptions(max_size=None)
    ManagedLedgerConfig(max_ledger_bytes=None, retention_bytes=None,
                        offload_threshold_seconds=None)
