"""The disk cache is a cache: a full cache disk neither stops a store from
opening nor fails a read; the store reads from memory and the bucket instead,
and says so. Only a store that asked for the disk tier strictly refuses to open.

The full disk is a small tmpfs filled up (the test runs as root); where mounting
is not permitted, diskcache's SQLite is made to fail as a full disk does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import pytest

from tests.store.conftest import KiB, small_config
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.store import AsyncMessageStore, ReadOnlyMessageStore


class FullDisk:
    """A directory on a disk that :meth:`fill` makes full."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch, *, mounted: bool) -> None:
        self.path = path
        self.mounted = mounted
        self._monkeypatch = monkeypatch

    def fill(self) -> None:
        if self.mounted:
            with contextlib.suppress(OSError), open(self.path / "filler", "wb") as out:
                while True:
                    out.write(b"\0" * 4096)
                    out.flush()
            return

        def full(*args: Any, **kwargs: Any) -> Any:
            raise sqlite3.OperationalError("database or disk is full")

        self._monkeypatch.setattr(diskcache.Cache, "__init__", full)
        self._monkeypatch.setattr(diskcache.Cache, "set", full)


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FullDisk]:
    path = tmp_path / "small-disk"
    path.mkdir()
    try:
        mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(path)],
            capture_output=True, check=False).returncode == 0
    except OSError:  # no mount command
        mounted = False
    try:
        yield FullDisk(path, monkeypatch, mounted=mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=True)


def cached(tmp_path: Path, disk: FullDisk, **overrides: Any) -> TieredStoreConfig:
    return small_config(backend="local", local_path=str(tmp_path / "data"),
                        disk_cache_bytes=64 * KiB * KiB,
                        disk_cache_path=str(disk.path / "cache"), gc_interval=0,
                        **overrides)


async def test_a_full_cache_disk_opens_writer_and_reader_without_the_disk_tier(
        tmp_path: Path, full_disk: FullDisk, caplog: pytest.LogCaptureFixture) -> None:
    config = cached(tmp_path, full_disk)
    full_disk.fill()
    with caplog.at_level(logging.WARNING):
        writer = await AsyncMessageStore.open(config)
    try:
        assert f"{full_disk.path / 'cache'}" in caplog.text
        assert "full" in caplog.text
        assert writer.snapshot()["fetcher"]["disk_enabled"] is False
        for i in range(20):
            await writer.append("t", 0, b"m%d" % i)
        await writer.flush()
        assert len(await writer.get("t", 0, 0, max_count=64)) == 20
    finally:
        await writer.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        reader = await ReadOnlyMessageStore.open(config)
    try:
        assert f"{full_disk.path / 'cache'}" in caplog.text
        assert reader.fetcher.disk is None
        assert [m.body for m in await reader.get("t", 0, 0, max_count=64)] == [
            b"m%d" % i for i in range(20)]
    finally:
        await reader.close()


async def test_a_required_disk_cache_on_a_full_disk_is_an_error_naming_its_path(
        tmp_path: Path, full_disk: FullDisk) -> None:
    config = cached(tmp_path, full_disk, disk_cache_required=True)
    full_disk.fill()
    for opening in (AsyncMessageStore.open, ReadOnlyMessageStore.open):
        with pytest.raises(ConfigError, match="disk_cache_path") as info:
            await opening(config)
        assert str(full_disk.path / "cache") in str(info.value)


async def test_a_cache_disk_that_fills_up_later_does_not_fail_a_read(
        tmp_path: Path, full_disk: FullDisk, caplog: pytest.LogCaptureFixture) -> None:
    config = cached(tmp_path, full_disk)
    writer = await AsyncMessageStore.open(config.replace(disk_cache_bytes=0))
    bodies = [os.urandom(1000) for _ in range(300)]
    for body in bodies:
        await writer.append("t", 0, body)
    await writer.close()
    reader = await ReadOnlyMessageStore.open(config)
    try:
        assert reader.fetcher.disk is not None
        full_disk.fill()
        got: list[bytes] = []
        with caplog.at_level(logging.WARNING):
            while len(got) < len(bodies):
                got += [m.body for m in await reader.get("t", 0, len(got), max_count=16)]
            await reader.fetcher.wait_idle()
        assert got == bodies
        assert reader.fetcher.disk is None  # dropped: memory and the bucket only
        assert caplog.text.count("memory and the store only") == 1
    finally:
        await reader.close()
