"""What only the local-directory backend must get right: its files stay its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tieredstore.checksum import crc32c
from tieredstore.errors import InvalidRequest
from tieredstore.objectstore import ByteRange, LocalObjectStore, ObjectData


async def _keys(store: LocalObjectStore, prefix: str) -> list[str]:
    return [o.key for o in await store.list_all(prefix)]


async def test_local_listing_stays_inside_its_root(tmp_path: Path) -> None:
    outside = LocalObjectStore(tmp_path / "outside", fsync=False)
    await outside.put("secret", b"not yours")
    store = LocalObjectStore(tmp_path / "store", fsync=False)
    for prefix in ("../", "../../", "../../outside/objects/"):
        assert await _keys(store, prefix) == [], prefix


@pytest.mark.parametrize("length", [252, 300])
async def test_local_refuses_key_components_longer_than_a_file_name(
    tmp_path: Path, length: int
) -> None:
    # Refused as a key it cannot hold (like "a//b"), not an OSError (ENAMETOOLONG).
    store = LocalObjectStore(tmp_path, fsync=False)
    key = "a/" + "x" * length  # plus "%obj": more than 255 bytes
    with pytest.raises(InvalidRequest, match="longer than a file name"):
        await store.put(key, b"1")
    with pytest.raises(InvalidRequest, match="longer than a file name"):
        await store.get(key)
    with pytest.raises(InvalidRequest, match="longer than a file name"):
        await store.head(key)
    with pytest.raises(InvalidRequest):
        await store.put("a/\x01" + "\u00e9" * 43, b"1")  # a control character: escaped


async def test_local_takes_a_component_of_exactly_a_file_name(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path, fsync=False)
    key = "a/" + "x" * 251  # plus "%obj": 255 bytes, the most a name may have
    await store.put(key, b"fits")
    assert await store.get(key) == b"fits"
    assert await _keys(store, "a/") == [key]


@pytest.mark.parametrize("part", ["主题" * 33 + "ab", "%" * 200, "+" + "é" * 99 + "+",
                                  "%obj" * 50, "x" * 200],
                         ids=["cjk", "percent", "plus", "suffix", "ascii"])
async def test_local_takes_every_component_of_200_utf8_bytes(tmp_path: Path, part: str) -> None:
    """Any name the store allows (200 bytes of UTF-8) is a file name, as a
    directory and as an object: kept as it is where percent-encoding is too long."""
    assert len(part.encode()) == 200
    store = LocalObjectStore(tmp_path, fsync=False)
    keys = sorted([f"a/{part}", f"a/{part}/b", f"a/{part}/{part}", "a/z", f"{part}%obj"])
    for key in keys:
        await store.put(key, key.encode())
    for key in keys:
        assert await store.get(key) == key.encode()
        assert (await store.head(key)).size == len(key.encode())
    assert await _keys(store, "") == keys
    assert (tmp_path / "objects" / "a" / "z%obj").is_file()  # what fits stays percent-encoded
    assert await _keys(store, f"a/{part}/") == sorted([f"a/{part}/b", f"a/{part}/{part}"])
    await store.delete_many(keys)
    assert await _keys(store, "") == []


async def test_a_full_disk_is_an_object_store_error_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from tieredstore.errors import ObjectStoreError

    store = LocalObjectStore(tmp_path, fsync=False)

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "tmp" / "x"))

    monkeypatch.setattr(store, "_write_tmp", full)
    with pytest.raises(ObjectStoreError, match="No space left on device") as caught:
        await store.put("a/b", b"data")
    assert not isinstance(caught.value, OSError) and caught.value.key == "a/b"
    monkeypatch.undo()
    assert await store.list_all("") == []  # nothing stored
    await store.close()


class _Flipping(LocalObjectStore):
    """A fault injector of the kind tests write: its get_object flips a byte."""

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        got = await super().get_object(key, byte_range)
        return ObjectData(bytes([got.data[0] ^ 1]) + got.data[1:], got.info)


async def test_a_crc_read_goes_through_a_subclass_that_reads_its_own_way(
    tmp_path: Path,
) -> None:
    """The local store computes a read's CRC32C in its worker thread, beside the
    read; a subclass whose get_object changes the bytes is not bypassed: the
    CRC is of what it returns."""
    store = _Flipping(tmp_path)
    await store.put("k", b"abcdef")
    got = await store.get_object_with_crc("k")
    assert got.data == b"`bcdef"
    assert got.crc32c == crc32c(b"`bcdef") != crc32c(b"abcdef")
    plain = await LocalObjectStore(tmp_path).get_object_with_crc("k", ByteRange(1, 3))
    assert (plain.data, plain.crc32c) == (b"bcd", crc32c(b"bcd"))
