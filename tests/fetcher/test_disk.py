"""The disk tier on diskcache: checked entries, persistence, corruption, eviction."""

from __future__ import annotations

import os
from pathlib import Path

import diskcache
import pytest

from tieredstore.checksum import crc32c
from tieredstore.fetcher import CorruptEntry, DiskTier, Lookup, decode_entry, encode_entry

KiB = 1024


def test_entry_codec_round_trips_and_refuses_damage() -> None:
    data = os.urandom(100)
    raw = encode_entry(data, crc32c(data))
    assert decode_entry(raw) == (data, crc32c(data))
    damaged = bytearray(raw)
    damaged[20] ^= 1
    with pytest.raises(CorruptEntry, match="CRC32C"):
        decode_entry(bytes(damaged))
    with pytest.raises(CorruptEntry, match="magic"):
        decode_entry(b"XXXX" + raw[4:])
    with pytest.raises(CorruptEntry, match="shorter"):
        decode_entry(raw[:5])


@pytest.mark.parametrize("size", [100, 64 * KiB], ids=["in-sqlite", "in-file"])
async def test_entries_survive_reopening(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    disk = DiskTier(tmp_path / "cache", 10 * 1024 * KiB)
    assert await disk.put("k", data, crc32c(data), tag="seg")
    await disk.close()
    again = DiskTier(tmp_path / "cache", 10 * 1024 * KiB)
    try:
        assert await again.get("k", size, crc32c(data)) == (Lookup.HIT, data, crc32c(data))
        assert (await again.get("other", size))[0] is Lookup.MISS
    finally:
        await again.close()


@pytest.mark.parametrize("size", [100, 64 * KiB], ids=["in-sqlite", "in-file"])
async def test_tampered_entry_is_deleted_not_returned(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    disk = DiskTier(tmp_path / "cache", 10 * 1024 * KiB)
    try:
        await disk.put("k", data, crc32c(data), tag="seg")
        raw = bytearray(encode_entry(data, crc32c(data)))
        raw[-1] ^= 0xFF
        with diskcache.Cache(disk.directory) as cache:  # a second handle, as another process
            cache.set("k", bytes(raw))
        assert (await disk.get("k", size))[0] is Lookup.CORRUPT
        assert (await disk.get("k", size))[0] is Lookup.MISS, "the corrupt entry was kept"
    finally:
        await disk.close()


async def test_entry_that_disagrees_with_the_unit_is_dropped(tmp_path: Path) -> None:
    """A self-consistent entry of other bytes (a stale unit) is not served."""
    old, new = b"a" * 100, b"b" * 100
    disk = DiskTier(tmp_path / "cache", 1024 * KiB)
    try:
        await disk.put("k", old, crc32c(old), tag="seg")
        assert (await disk.get("k", 100, crc32c(new)))[0] is Lookup.CORRUPT
        await disk.put("k", old, crc32c(old), tag="seg")
        assert (await disk.get("k", 99))[0] is Lookup.CORRUPT
    finally:
        await disk.close()


async def test_evict_by_segment_tag(tmp_path: Path) -> None:
    disk = DiskTier(tmp_path / "cache", 1024 * KiB)
    try:
        for key, tag in (("a1", "A"), ("a2", "A"), ("b1", "B")):
            await disk.put(key, b"x" * 10, crc32c(b"x" * 10), tag=tag)
        assert await disk.evict("A") == 2
        assert (await disk.get("a1", 10))[0] is Lookup.MISS
        assert (await disk.get("b1", 10))[0] is Lookup.HIT
    finally:
        await disk.close()


async def test_size_limit_bounds_the_bytes_on_disk(tmp_path: Path) -> None:
    limit = 2 * 1024 * KiB
    disk = DiskTier(tmp_path / "cache", limit)
    try:
        data = os.urandom(64 * KiB)
        for i in range(100):  # 6.4 MiB through a 2 MiB cache
            await disk.put(f"k{i}", data, crc32c(data), tag="seg")
        # diskcache culls up to 10 entries per store, so it stays near the limit.
        assert await disk.volume() <= limit + 256 * KiB
        assert (await disk.get("k99", len(data)))[0] is Lookup.HIT
        assert (await disk.get("k0", len(data)))[0] is Lookup.MISS
    finally:
        await disk.close()
