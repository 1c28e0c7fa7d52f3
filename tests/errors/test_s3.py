"""Rows B (buckets) and S (secrets) of docs/errors.md, on a moto S3 server.

A store never creates a bucket unless asked (``s3_create_bucket``, the CLI's
``--create-bucket``); a missing bucket is an error naming it. The S3 secret
shows nowhere: a whole run's DEBUG log lines, errors, CLI output, metrics and
reprs are searched for it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import logging
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.errors.helpers import TOPIC, oracle_messages
from tests.servers import ACCESS_KEY, S3Server
from tieredstore.cli import main
from tieredstore.config import load_config
from tieredstore.errors import ConfigError, NoSuchBucket, TieredStoreError
from tieredstore.metrics import register_metrics
from tieredstore.objectstore import S3ObjectStore, S3Settings
from tieredstore.store import MessageStore
from tieredstore.store.base.compose import open_object_store

pytestmark = pytest.mark.s3

SECRET = f"Secret-{uuid.uuid4().hex}"  # moto takes any credentials
RECORD_KEY_BYTES = os.urandom(32)
RECORD_KEY = base64.b64encode(RECORD_KEY_BYTES).decode()  # encryption = "aes-gcm"
ENCRYPTED = {"compression": "zstd", "encryption": "aes-gcm", "encryption_key": RECORD_KEY}


def settings(server: S3Server, bucket: str, **overrides: Any) -> dict[str, Any]:
    return {"backend": "s3", "s3_bucket": bucket, "s3_endpoint_url": server.endpoint_url,
            "s3_region": "us-east-1", "s3_addressing_style": "path",
            "s3_access_key_id": ACCESS_KEY, "s3_secret_access_key": SECRET,
            "group_commit_interval": 0.01, "gc_interval": 0, **overrides}


def env_of(values: dict[str, Any]) -> dict[str, str]:
    return {f"TIEREDSTORE_{k.upper()}": str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in values.items()}


def buckets(server: S3Server) -> list[str]:
    async def go() -> list[str]:
        store = S3ObjectStore(S3Settings(bucket="any", endpoint_url=server.endpoint_url,
                                         region="us-east-1", addressing_style="path",
                                         access_key_id=ACCESS_KEY, secret_access_key=SECRET))
        try:
            client = await store._get_client()
            return [b["Name"] for b in (await client.list_buckets())["Buckets"]]
        finally:
            await store.close()
    return asyncio.run(go())


def fresh_bucket() -> str:
    return f"errors-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def seeded_bucket(moto: S3Server) -> Iterator[tuple[str, list[Any]]]:
    """A bucket holding flushed messages: they must survive every case."""
    bucket = fresh_bucket()
    config = load_config(env={}, **settings(moto, bucket, s3_create_bucket=True))
    with MessageStore.open(config) as store:
        for m in oracle_messages(8):
            store.append(TOPIC, 0, m["body"], keys=m["keys"], tags=m["tags"],
                         properties=m["properties"], timestamp=m["timestamp"])
        store.flush()
        written = store.get(TOPIC, 0, 0, max_count=100)
    yield bucket, written
    with MessageStore.open(config) as store:
        assert store.get(TOPIC, 0, 0, max_count=100) == written


# --- buckets ------------------------------------------------------------------------------


def test_opening_a_missing_bucket_is_an_error_naming_it_and_creates_nothing(
        moto: S3Server, seeded_bucket: tuple[str, list[Any]]) -> None:
    """Row B01."""
    before = buckets(moto)
    config = load_config(env={}, **settings(moto, seeded_bucket[0] + "x"))
    with pytest.raises(NoSuchBucket, match=rf"bucket '{seeded_bucket[0]}x' does not exist at "
                       r"http://.*; create it, or set s3_create_bucket = true \(the CLI: "
                       r"--create-bucket\)") as info:
        MessageStore.open(config)
    assert info.value.bucket == seeded_bucket[0] + "x"
    assert isinstance(info.value, FileNotFoundError)
    assert buckets(moto) == before


def test_the_cli_names_the_missing_bucket(moto: S3Server, seeded_bucket: tuple[str, list[Any]],
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows B02 (produce), B03 (consume, read-only), B04 (inspect)."""
    missing = fresh_bucket()
    for name, value in env_of(settings(moto, missing)).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(Path(__file__).parent)  # no conf/tieredstore.toml here
    before = buckets(moto)
    for argv, words in (
            (["produce", "--topic", "t", "--queue", "0", "--count", "1"],
             rf"^tieredstore: bucket '{missing}' does not exist at http://\S+; create it, or "
             r"set s3_create_bucket = true \(the CLI: --create-bucket\)$"),
            (["consume", "--topic", "t", "--queue", "0"],
             rf"^tieredstore: bucket '{missing}' does not exist at http://\S+$"),
            (["inspect"], rf"^tieredstore: bucket '{missing}' does not exist at http://\S+$"),
            (["verify", "--json"],
             rf"^tieredstore: bucket '{missing}' does not exist at http://\S+$")):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and re.search(words, err.strip()), err
    assert buckets(moto) == before


def test_a_bucket_is_created_only_when_asked(moto: S3Server, seeded_bucket: tuple[str, Any],
                                             capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Row B05: ``s3_create_bucket = true`` and ``--create-bucket``."""
    first, second = fresh_bucket(), fresh_bucket()
    MessageStore.open(load_config(env={}, **settings(moto, first, s3_create_bucket=True))).close()
    assert first in buckets(moto)
    for name, value in env_of(settings(moto, second)).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(Path(__file__).parent)
    assert main(["produce", "--topic", "t", "--queue", "0", "--count", "2",
                 "--create-bucket"]) == 0
    assert second in buckets(moto)
    capsys.readouterr()
    assert main(["consume", "--topic", "t", "--queue", "0", "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


CASES_WITHOUT_ERROR = {
    "B01": test_opening_a_missing_bucket_is_an_error_naming_it_and_creates_nothing,
    "B02": test_the_cli_names_the_missing_bucket,
    "B03": test_the_cli_names_the_missing_bucket,
    "B04": test_the_cli_names_the_missing_bucket,
    "B05": test_a_bucket_is_created_only_when_asked,
}

# --- secrets -------------------------------------------------------------------------------


class Everything(logging.Handler):
    """Every log record of every logger, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_reprs_and_errors_redact_the_secret(moto: S3Server) -> None:
    """Rows S01-S05."""
    config = load_config(env={}, **settings(moto, fresh_bucket(), s3_create_bucket=True,
                                            **ENCRYPTED))
    store = open_object_store(config)
    assert isinstance(store, S3ObjectStore)
    with MessageStore.open(config) as ms:
        shown = {"S01 print(config)": str(config), "S01 repr(config)": repr(config),
                 "S02 repr(S3Settings)": repr(store.settings), "S02 str": str(store.settings),
                 "S03 repr(StoreContext)": repr(ms.core.ctx),
                 "S03 repr(MessageStore)": repr(ms), "S03 repr(store)": repr(store),
                 "S03 snapshot": str(ms.snapshot())}
    for what, text in shown.items():
        assert SECRET not in text, what
        assert RECORD_KEY not in text and repr(RECORD_KEY_BYTES) not in text, what
    assert "s3_secret_access_key='<redacted>'" in shown["S01 print(config)"]
    assert "encryption_key='<redacted>'" in shown["S01 print(config)"]
    assert "secret_access_key='<redacted>'" in shown["S02 repr(S3Settings)"]
    asyncio.run(store.close())
    with pytest.raises(ConfigError, match=r"must be str, got list \(value not shown\)") as info:
        load_config(env={}, s3_secret_access_key=[SECRET])  # row S04
    assert SECRET not in str(info.value)
    with pytest.raises(ConfigError) as info:  # row S05: another key's error, the secret set
        load_config(env=env_of(settings(moto, "b", chunk_size="lots")))
    assert SECRET not in str(info.value) and "chunk_size" in str(info.value)


CASES_WITHOUT_ERROR.update({f"S0{i}": test_reprs_and_errors_redact_the_secret
                            for i in range(1, 6)})


@contextlib.contextmanager
def every_log_line() -> Iterator[Everything]:
    root = logging.getLogger()
    handler = Everything()
    levels = {name: logging.getLogger(name).level for name in ("", "tieredstore", "botocore",
                                                                 "aiobotocore", "boto3")}
    root.addHandler(handler)
    for name in levels:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def test_a_whole_run_never_shows_the_secret(moto: S3Server, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Row S06: every DEBUG log line, error, CLI output and metric of a run."""
    bucket = fresh_bucket()
    values = settings(moto, bucket, s3_create_bucket=True, **ENCRYPTED)
    seen: list[str] = []
    with every_log_line() as logs:
        # the library: open, write, read, fail in several ways, export metrics
        config = load_config(env=env_of(values))
        with MessageStore.open(config) as ms:
            for i in range(20):
                ms.append("s", 0, b"m%d" % i, keys=[f"k{i}"], properties={"p": "v"})
            ms.flush()
            assert len(ms.get("s", 0, 0, max_count=50)) == 20
            for bad in (lambda: ms.append("s", 0, "text"),  # type: ignore[arg-type]
                        lambda: ms.get("s", 0, -1),
                        lambda: ms.append("s", 0, b"x", timestamp=1),
                        lambda: ms.get("nope", 0, 0)):
                with pytest.raises(TieredStoreError) as info:
                    bad()
                seen.append(str(info.value))
            registry = CollectorRegistry()
            register_metrics(registry, store=ms.core.ctx.store.metrics,
                             fetcher=ms.core.ctx.fetcher, pool=ms.core.ctx.pool.metrics)
            seen.append(generate_latest(registry).decode())
            seen.append(str(ms.snapshot()))
        for broken in (dict(values, s3_bucket=bucket + "-missing", s3_create_bucket=False),
                       dict(values, s3_endpoint_url="http://127.0.0.1:9")):
            with pytest.raises(TieredStoreError) as info:
                MessageStore.open(load_config(env={}, **broken, retry_max_attempts=1))
            seen.append(str(info.value))
        # the command, configured by the environment, with --debug
        for name, value in env_of(values).items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path)
        for argv in (["produce", "--topic", "c", "--queue", "0", "--count", "5"],
                     ["consume", "--topic", "c", "--queue", "0", "--json"],
                     ["inspect"], ["inspect", "segments", "--json"], ["verify"],
                     ["recover"], ["gc", "--dry-run"],
                     ["produce", "--topic", "c", "--queue", "0", "--count", "1", "--timestamp",
                      "1", "--debug"],
                     ["consume", "--topic", "nope", "--queue", "0", "--debug"]):
            capsys.readouterr()
            with contextlib.redirect_stdout(io.StringIO()) as out:
                main(argv)
            captured = capsys.readouterr()
            seen += [out.getvalue(), captured.out, captured.err]
        monkeypatch.setenv("TIEREDSTORE_S3_SECRET_ACCESS_KEY", SECRET)
        monkeypatch.setenv("TIEREDSTORE_CHUNK_SIZE", "lots")
        assert main(["consume", "--topic", "c", "--queue", "0", "--debug"]) == 2
        captured = capsys.readouterr()
        seen += [captured.out, captured.err]
    assert len(logs.lines) > 100, "DEBUG logging did not reach the handler"
    assert any("botocore" in line for line in logs.lines)
    leaks = [line for line in [*logs.lines, *seen]
             if SECRET in line or RECORD_KEY in line or repr(RECORD_KEY_BYTES) in line]
    assert not leaks, leaks[:3]
    assert os.environ.get("TIEREDSTORE_S3_SECRET_ACCESS_KEY") == SECRET  # it was in play


CASES_WITHOUT_ERROR["S06"] = test_a_whole_run_never_shows_the_secret
