"""Durations and sizes with units, in the file, the environment and code.

Decisions (docs/configuration.md): sizes are bytes or IEC units (``8MiB``);
``MB``/``GB``/``KB`` and bare letters are refused as ambiguous, the error
suggesting ``MiB`` and the plain number of bytes. Durations take ``ms``, ``s``,
``m``/``min``, ``h``, ``d`` and combinations (``1h30m``); a plain number is
seconds, except for keys that delete data when their time runs out, where a
plain number written in the file or the environment is refused ("write 72h
or 72s"); code passes seconds.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tieredstore.config import (
    REFERENCE_FILE,
    GiB,
    KiB,
    MiB,
    load_config,
    parse_duration,
    parse_size,
)
from tieredstore.errors import ConfigError

RETENTION_KEYS = ("file_reserved_time", "gc_safety_age", "ledger_deletion_lag",
                  "ledger_retention_time")


@pytest.mark.parametrize(("text", "size"), [
    ("8MiB", 8 * MiB), ("1GiB", GiB), ("512KiB", 512 * KiB), ("4194304", 4 * MiB),
    ("8 MiB", 8 * MiB), ("8mib", 8 * MiB), ("1.5KiB", 1536), ("1_000_000", 10**6), ("0", 0),
    ("100B", 100),
])
def test_a_size_is_bytes_or_an_iec_unit(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(("text", "iec", "plain"), [
    ("4MB", "4MiB (4194304 bytes)", "4000000"), ("1GB", "1GiB (1073741824 bytes)", "1000000000"),
    ("512KB", "512KiB (524288 bytes)", "512000"), ("64k", "64KiB (65536 bytes)", "64000"),
    ("4m", "4MiB (4194304 bytes)", "4000000"), ("2g", "2GiB", "2000000000"),
])
def test_an_si_or_bare_letter_size_is_refused_as_ambiguous(text: str, iec: str,
                                                             plain: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env={"TIEREDSTORE_POOL_BYTES": text})
    message = str(info.value)
    assert info.value.key == "pool_bytes"
    assert f"{text!r}" in message and "ambiguous" in message, message
    assert f"write {iec}" in message and f"or {plain} (bytes)" in message, message
    assert "(from TIEREDSTORE_POOL_BYTES)" in message


@pytest.mark.parametrize(("text", "seconds"), [
    ("72h", 72 * 3600.0), ("500ms", 0.5), ("10s", 10.0), ("7d", 7 * 86400.0),
    ("1h30m", 5400.0), ("90min", 5400.0), ("1h 30m", 5400.0), ("50ms", 0.05), ("0", 0.0),
    ("inf", math.inf), ("1.5h", 5400.0),
])
def test_a_duration_takes_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "1x", "72 hours", "1h-30m", "nan", "1e400h", "h1"])
def test_a_duration_that_is_not_one_is_refused_saying_what_is_expected(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env={"TIEREDSTORE_REQUEST_TIMEOUT": text})
    message = str(info.value)
    assert info.value.key == "request_timeout"
    assert f"cannot read {text!r} as a duration" in message, message
    assert "500ms, 10s, 30m, 72h, 7d, 1h30m" in message and "a plain number is seconds" in message


def test_durations_with_units_from_the_file_and_the_environment(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('file_reserved_time = "7d"\ngroup_commit_interval = "500ms"\n'
                    'rolling_interval = "1h30m"\nrequest_timeout = 10\n')
    config = load_config(conf, env={"TIEREDSTORE_GC_SAFETY_AGE": "2h",
                                    "TIEREDSTORE_RETRY_MAX_DELAY": "1.5"})
    assert config.file_reserved_time == 7 * 86400
    assert config.group_commit_interval == 0.5
    assert config.rolling_interval == 5400
    assert config.request_timeout == 10.0  # a plain number: seconds
    assert config.gc_safety_age == 7200
    assert config.retry_max_delay == 1.5


@pytest.mark.parametrize("key", RETENTION_KEYS)
def test_a_plain_number_for_a_retention_is_refused_in_the_file(tmp_path: Path, key: str) -> None:
    """RocketMQ's ``fileReservedTime=72`` is hours: read as seconds it would delete
    three days of data at the next pass. Refused, with both readings spelled out."""
    conf = tmp_path / "c.toml"
    conf.write_text(f"{key} = 72\n")
    with pytest.raises(ConfigError) as info:
        load_config(conf, env={})
    assert info.value.key == key
    assert 'write "72h" or "72s"' in str(info.value), str(info.value)
    assert "c.toml" in str(info.value)


@pytest.mark.parametrize("key", RETENTION_KEYS)
def test_a_plain_number_for_a_retention_is_refused_in_the_environment(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env={f"TIEREDSTORE_{key.upper()}": "72"})
    assert info.value.key == key
    assert "'72' has no unit: write 72h or 72s" in str(info.value), str(info.value)


def test_a_retention_of_zero_needs_no_unit_and_code_passes_seconds(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text("file_reserved_time = 0\n")
    assert load_config(conf, env={}).file_reserved_time == 0
    assert load_config(env={"TIEREDSTORE_FILE_RESERVED_TIME": "0"}).file_reserved_time == 0
    assert load_config(env={}, file_reserved_time=72).file_reserved_time == 72.0
    assert load_config(env={}, file_reserved_time="72h").file_reserved_time == 72 * 3600.0


def test_a_duration_out_of_range_names_the_range_in_units() -> None:
    with pytest.raises(ConfigError, match=r"'request_timeout': must be in \[1 ms, 1 h\], got "
                                          r"2 h \(from TIEREDSTORE_REQUEST_TIMEOUT\)"):
        load_config(env={"TIEREDSTORE_REQUEST_TIMEOUT": "2h"})


def test_the_shipped_file_writes_every_duration_with_a_unit() -> None:
    import dataclasses
    import re

    from tieredstore.config import TieredStoreConfig

    text = REFERENCE_FILE.read_text()
    for f in dataclasses.fields(TieredStoreConfig):
        if f.name != "topics" and f.metadata["unit"] == "s":
            line = re.search(rf"^{f.name} = (.*)$", text, flags=re.MULTILINE)
            assert line is not None and re.fullmatch(r'"(\d+(ms|s|m|h|d))+"|"off"',
                                                      line.group(1)), f.name
