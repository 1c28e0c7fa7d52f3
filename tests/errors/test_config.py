"""Rows C of docs/errors.md: every way a file, a value or an environment variable
can be wrong gets a ConfigError naming the key or the file, before anything is
written. After each case, the store written before reads back byte for byte."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.errors.helpers import Case, cases_by_id, read_local, seed_local
from tieredstore.config import KiB, MiB, TieredStoreConfig, load_config
from tieredstore.errors import ConfigError

SECRET_NUMBER = 987654321


def file(text: str | bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / "conf.toml"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path
    return make


def from_file(text: str | bytes) -> Callable[[Path], Any]:
    return lambda tmp: load_config(file(text)(tmp), env={})


def from_env(**env: str) -> Callable[[Path], Any]:
    return lambda tmp: load_config(env={f"TIEREDSTORE_{k.upper()}": v for k, v in env.items()})


def given(**overrides: Any) -> Callable[[Path], Any]:
    return lambda tmp: load_config(env={}, **overrides)


def a_file(tmp: Path) -> str:
    (tmp / "afile").write_text("x")
    return str(tmp / "afile")


CASES = cases_by_id(
    # --- the file --------------------------------------------------------------------------------
    Case("C01", from_file(b"\x89PNG\r\n\x1a\n\x00"), ConfigError,
         r"config 'file': '.*conf.toml' is not a TOML file: not UTF-8 text \(byte 0x89 at "
         r"offset 0\)"),
    Case("C02", lambda tmp: load_config(tmp, env={}), ConfigError,
         r"config 'file': '.*' is a directory, not a TOML file"),
    Case("C03", lambda tmp: load_config(tmp / "nope.toml", env={}), ConfigError,
         r"config 'file': '.*nope.toml' does not exist"),
    Case("C34", from_file("chunk_size = = 1\n"), ConfigError,
         r"config 'file': '.*conf.toml' is not valid TOML: Invalid value \(at line 1"),
    Case("C08", from_file('[s3]\nchunk_size = "1MiB"\n[segments]\nchunk_size = "2MiB"\n'),
         ConfigError, r"config 'chunk_size': is set twice in .*conf.toml: in \[s3\] and in "
                      r"\[segments\]"),
    Case("C35", from_file('chunk_size = "1MiB"\n[segments]\nchunk_size = "2MiB"\n'),
         ConfigError, r"config 'chunk_size': is set twice in .*: in the top level and in "
                      r"\[segments\]"),
    Case("C21", from_file('chunk_siz = "1MiB"\n'), ConfigError,
         r"config 'chunk_siz': unknown key; did you mean 'chunk_size'\? \(in .*conf.toml, the "
         r"top level\)"),
    Case("C20", from_file("[requests]\nrequest_timeout = true\n"), ConfigError,
         r"config 'request_timeout': must be float, got True \(in .*conf.toml, \[requests\]\)"),
    Case("C26", from_file("chunk_size = 4.5\n"), ConfigError,
         r"config 'chunk_size': must be int, got 4.5 \(in .*conf.toml, the top level\)"),
    Case("C44", from_file(f"s3_secret_access_key = {SECRET_NUMBER}\n"), ConfigError,
         r"config 's3_secret_access_key': must be str, got int \(value not shown\)"),
    Case("C31", lambda tmp: load_config(5, env={}), ConfigError,  # type: ignore[arg-type]
         r"config 'file': must be a path \(str or PathLike\), got int"),
    # --- the environment -------------------------------------------------------------------------
    Case("C04", from_env(pool_bytes="infKiB"), ConfigError,
         r"config 'pool_bytes': cannot read 'infKiB' as a size: must be a whole number of bytes, "
         r"or with a unit: 512KiB, 8MiB, 1GiB \(MB, GB, KB are refused as ambiguous\) \(from "
         r"TIEREDSTORE_POOL_BYTES\)"),
    Case("C05", from_env(pool_bytes="nan"), ConfigError,
         r"config 'pool_bytes': cannot read 'nan' as a size"),
    Case("C27", from_env(chunk_size="1.0001KiB"), ConfigError,
         r"config 'chunk_size': cannot read '1.0001KiB' as a size: must be a whole number"),
    Case("C43", from_env(chunk_size="lots"), ConfigError,
         r"config 'chunk_size': cannot read 'lots' as a size.*\(from TIEREDSTORE_CHUNK_SIZE\)"),
    Case("C28", from_env(local_fsync="maybe"), ConfigError,
         r"config 'local_fsync': cannot read 'maybe' as bool: must be true or false"),
    Case("C07", from_env(chunk_siz="1MiB"), ConfigError,
         r"config 'chunk_siz': TIEREDSTORE_CHUNK_SIZ names no key; did you mean 'chunk_size' "
         r"\(TIEREDSTORE_CHUNK_SIZE\)\?"),
    Case("C46", from_env(request_timeout="inf"), ConfigError,
         r"config 'request_timeout': must be in \[1 ms, 1 h\], got no limit \(from "
         r"TIEREDSTORE_REQUEST_TIMEOUT\)"),
    Case("C32", lambda tmp: load_config(env=["TIEREDSTORE_X=1"]),  # type: ignore[arg-type]
         ConfigError, r"config 'env': must be a mapping of names to values, got list"),
    # --- values ----------------------------------------------------------------------------------
    Case("C15", given(chunk_size=10), ConfigError,
         r"config 'chunk_size': must be in \[1 KiB, 5 GiB\], got 10 B"),
    Case("C16", given(commit_log_max_size=1), ConfigError,
         r"config 'commit_log_max_size': must be in \[1 KiB, 50000 GiB\], got 1 B"),
    Case("C47", given(file_reserved_time=-1), ConfigError,
         r"config 'file_reserved_time': must be in \[0 s, 36500 d\], got -1 s"),
    Case("C40", given(max_message_size=10), ConfigError,
         r"config 'max_message_size': must be in \[64 B, 1 GiB\], got 10 B"),
    Case("C41", given(timestamp_after_max=-1), ConfigError,
         r"config 'timestamp_after_max': must be at least 0 s \(inf: no limit\), got -1 s"),
    Case("C42", given(chunk_size=4 * MiB + 16), ConfigError,
         r"config 'chunk_size': must be a multiple of 1 KiB, got 4194320 B \(4.0 MiB\)"),
    Case("C17", given(commit_log_max_size=64 * KiB, max_message_size=MiB), ConfigError,
         r"config 'max_message_size': 1 MiB cannot fit a commit-log segment "
         r"\(commit_log_max_size = 64 KiB\); it must not exceed commit_log_max_size"),
    Case("C18", given(pool_bytes=MiB, max_message_size=2 * MiB), ConfigError,
         r"config 'pool_bytes': must be at least max_message_size = 2 MiB, got 1 MiB"),
    Case("C37", given(retry_base_delay=5.0, retry_max_delay=1.0), ConfigError,
         r"config 'retry_base_delay': must not exceed retry_max_delay = 1 s, got 5 s"),
    Case("C38", given(backend="ftp"), ConfigError,
         r"config 'backend': must be one of local, s3, memory; got 'ftp'"),
    Case("C39", given(backend="s3"), ConfigError,
         r"config 's3_bucket': is required when backend = 's3'"),
    Case("C19", given(s3_secret_access_key=SECRET_NUMBER), ConfigError,
         r"config 's3_secret_access_key': must be str, got int \(value not shown\)"),
    Case("C22", given(chunksize=1), ConfigError,
         r"config 'chunksize': unknown key; did you mean 'chunk_size'\?"),
    Case("C29", given(request_timeout=10**400), ConfigError,
         r"config 'request_timeout': is too large for a float: an int of 1329 bits"),
    Case("C48", given(local_fsync=1), ConfigError, r"config 'local_fsync': must be bool, got 1"),
    Case("C49", given(chunk_size=True), ConfigError, r"config 'chunk_size': must be int, got True"),
    # --- names and paths, checked before anything is written -------------------------------------
    Case("C09", given(cluster=".."), ConfigError,
         r"config 'cluster': invalid cluster '..': must not be '.' or '..' \(given in code\)"),
    Case("C10", given(broker="/abs"), ConfigError,
         r"config 'broker': invalid broker '/abs': must not contain '/'"),
    Case("C11", given(key_prefix="a/../b"), ConfigError,
         r"config 'key_prefix': 'a/../b': invalid key_prefix '..': must not be '.' or '..'"),
    Case("C12", given(key_prefix="/abs"), ConfigError,
         r"config 'key_prefix': '/abs' must be names joined by '/': no leading, trailing or "
         r"double '/'"),
    Case("C50", given(cluster=""), ConfigError, r"config 'cluster': invalid cluster '': must "
                                                 r"not be empty"),
    Case("C45", lambda tmp: TieredStoreConfig(broker="b\x00"), ConfigError,
         r"config 'broker': must not contain a NUL character"),
    Case("C13", given(local_path=""), ConfigError,
         r"config 'local_path': must not be empty \(use '.' for the working directory\)"),
    Case("C36", given(local_path="a\x00b"), ConfigError,
         r"config 'local_path': must not contain a NUL character"),
    Case("C30", lambda tmp: load_config(env={}, local_path=a_file(tmp)), ConfigError,
         r"config 'local_path': '.*afile' exists and is not a directory"),
    Case("C51", lambda tmp: load_config(env={}, local_path=a_file(tmp) + "/data"), ConfigError,
         r"config 'local_path': '.*afile/data' cannot be created: '.*afile' is not a directory"),
    Case("C52", given(local_path="x" * 5000), ConfigError,
         r"config 'local_path': 'xxx.*\(5002 characters\) cannot be used: File name too long"),
    Case("C14", lambda tmp: load_config(env={}, disk_cache_bytes=MiB,
                                        disk_cache_path=a_file(tmp) + "/cache"),
         ConfigError, r"config 'disk_cache_path': the disk cache directory '.*afile/cache' "
                      r"cannot be created: '.*afile' is not a directory"),
    Case("C33", lambda tmp: load_config(env={}, disk_cache_bytes=MiB,
                                        disk_cache_path=a_file(tmp)),
         ConfigError, r"config 'disk_cache_path': the disk cache directory '.*afile' exists and "
                      r"is not a directory"),
    Case("C23", given(backend="s3", s3_bucket="b", s3_endpoint_url="localhost:9000"),
         ConfigError, r"config 's3_endpoint_url': 'localhost:9000' must be an http:// or "
                      r"https:// URL"),
    Case("C24", given(backend="s3", s3_bucket="b", s3_region="us east"), ConfigError,
         r"config 's3_region': 'us east' is not a region name"),
    Case("C25", given(backend="s3", s3_bucket="my/bucket"), ConfigError,
         r"config 's3_bucket': 'my/bucket' is not a bucket name"),
)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_a_bad_configuration_is_a_config_error_naming_the_key(tmp_path: Path,
                                                              case_id: str) -> None:
    written = seed_local(tmp_path / "data")
    case = CASES[case_id]
    with pytest.raises(ConfigError) as info:
        case.call(tmp_path)
    text = str(info.value)
    assert re.search(case.match, text), f"{case_id}: {text!r} does not match {case.match!r}"
    assert "\n" not in text
    assert str(SECRET_NUMBER) not in text
    assert read_local(tmp_path / "data") == written


def test_the_config_variable_is_the_one_that_names_no_key() -> None:
    """``TIEREDSTORE_CONFIG`` (the file's path, for the CLI) is not read as a key."""
    config = load_config(env={"TIEREDSTORE_CONFIG": "x.toml", "TIEREDSTORE_CHUNK_SIZE": "8MiB"})
    assert config.chunk_size == 8 * MiB


def test_a_default_max_message_size_fits_small_segments_and_pools() -> None:
    assert load_config(env={}, commit_log_max_size=64 * KiB).max_message_size == 64 * KiB
    assert load_config(env={}, pool_bytes=2 * MiB).max_message_size == 2 * MiB
    assert load_config(env={}).max_message_size == 4 * MiB


def test_sizes_and_times_read_with_units(tmp_path: Path) -> None:
    config = load_config(file('pool_bytes = "1.5MiB"\ntimestamp_before_max = inf\n')(tmp_path),
                         env={"TIEREDSTORE_CHUNK_SIZE": "8 MiB",
                              "TIEREDSTORE_TIMESTAMP_AFTER_MAX": "inf"})
    assert (config.pool_bytes, config.chunk_size) == (1536 * KiB, 8 * MiB)
    assert config.timestamp_before_max == config.timestamp_after_max == float("inf")
