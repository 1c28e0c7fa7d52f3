"""Records compressed (zstd) and encrypted (AES-GCM) at rest: read back
transparently by every reader, nothing in the bucket in the clear, the wrong
or a missing key named, and both checksums checked (docs/records.md)."""

from __future__ import annotations

import base64
import os
import struct
from typing import Any

import pytest
import zstandard

from tests.store.conftest import KiB, Opener, small_config
from tieredstore.checksum import crc32c
from tieredstore.errors import ConfigError, InvalidArgumentType, KeyUnavailable
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import (
    AsyncMessageStore,
    MessageStore,
    MessageTooLarge,
    QueueCorrupt,
    ReadOnlyMessageStore,
    RecordCodec,
    RecordError,
    decode_record,
)
from tieredstore.store.formats.record import MIN_RECORD_SIZE, encode_record

KEY = base64.b64encode(b"k" * 32).decode()
OTHER_KEY = base64.b64encode(b"o" * 32).decode()
MODES: dict[str, dict[str, Any]] = {
    "zstd": {"compression": "zstd"},
    "aes-gcm": {"encryption": "aes-gcm", "encryption_key": KEY},
    "both": {"compression": "zstd", "encryption": "aes-gcm", "encryption_key": KEY},
}
MARK = b"plain-text-marker"


def body(i: int) -> bytes:
    return MARK + b" %05d " % i + b"the same words again and again " * 20


async def produce(store: AsyncMessageStore, count: int = 200) -> None:
    for i in range(count):
        await store.append("t", 0, body(i), keys=[f"k{i % 5}"], tags="odd" if i % 2 else None,
                           properties={"p": str(i)})
    await store.flush()


async def stored_bytes(backend: ObjectStore) -> bytes:
    return b"".join([await backend.get(o.key) for o in await backend.list_all("")])


async def read_all(reader: AsyncMessageStore | ReadOnlyMessageStore, count: int) -> None:
    got = await reader.get("t", 0, 0, max_count=count + 10, max_bytes=2**40)
    assert [m.body for m in got] == [body(i) for i in range(count)]
    assert [m.properties["p"] for m in got] == [str(i) for i in range(count)]
    assert [m.keys for m in got] == [(f"k{i % 5}",) for i in range(count)]


@pytest.mark.parametrize("mode", list(MODES))
async def test_every_reader_reads_sealed_records_back(open_store: Opener, backend: ObjectStore,
                                                      mode: str) -> None:
    settings = MODES[mode]
    store = await open_store(**settings)
    await produce(store)
    await read_all(store, 200)
    tagged = await store.get_by_tags("t", 0, 0, "odd", max_count=1000)
    assert [m.offset for m in tagged.messages] == list(range(1, 200, 2))
    assert [m.offset for m in await store.query_by_key("t", "k3", max_count=100)] == \
        list(range(3, 200, 5))
    await store.close()

    store = await open_store(**settings)  # recovery reads them too
    await read_all(store, 200)
    await produce_more(store)
    await store.close()
    async with await ReadOnlyMessageStore.open(small_config(**settings), store=backend) as ro:
        await read_all(ro, 200)
    if mode != "zstd":
        assert MARK not in await stored_bytes(backend), "a body is in the bucket in the clear"


async def produce_more(store: AsyncMessageStore) -> None:
    await store.append("t", 1, b"another queue")
    await store.flush()


@pytest.mark.parametrize("write_mode", ["log", "direct"])
async def test_a_writer_that_turned_compression_off_reads_what_it_compressed(
        write_mode: str) -> None:
    """A broker whose compression is switched off (and on again) reads its
    past: compressed records open without any setting, as plain ones do."""
    backend = MemoryObjectStore()
    settings: list[dict[str, Any]] = [{"compression": "zstd"}, {}, {"compression": "zstd"}]
    for n, extra in enumerate(settings):
        store = await AsyncMessageStore.open(
            small_config(write_mode=write_mode, **extra), store=backend)
        await store.append("t", 0, body(n), keys=[f"k{n % 5}"], tags="odd" if n % 2 else None,
                           properties={"p": str(n)})
        await store.flush()
        got = await store.get("t", 0, 0, max_count=10)
        assert [m.body for m in got] == [body(i) for i in range(n + 1)]
        assert [m.offset for m in await store.query_by_key("t", "k0")] == [0]
        tagged = await store.get_by_tags("t", 0, 0, "odd", max_count=10)
        assert [m.offset for m in tagged.messages] == [1] * (n >= 1)
        await store.close()


async def test_compression_stores_fewer_bytes() -> None:
    sizes = {}
    for mode in ("none", "zstd"):
        backend = MemoryObjectStore()
        store = await AsyncMessageStore.open(
            small_config(compression=mode, commit_log_max_size=256 * KiB, pool_bytes=1024 * KiB),
            store=backend)
        await produce(store)
        await store.close()
        sizes[mode] = sum(o.size for o in await backend.list_all("") if "/commitlog/" in o.key
                          or "/log/" in o.key)
    assert sizes["zstd"] * 3 < sizes["none"], sizes


async def test_the_wrong_key_or_none_is_named_and_nothing_is_returned() -> None:
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(small_config(**MODES["aes-gcm"]), store=backend)
    await produce(store, 20)
    await store.close()
    wrong = small_config(encryption="aes-gcm", encryption_key=OTHER_KEY)
    async with await ReadOnlyMessageStore.open(wrong, store=backend) as ro:
        with pytest.raises(QueueCorrupt, match="fails authentication"):
            await ro.get("t", 0, 0)
    keyless = small_config(encryption="aes-gcm")
    for config in (small_config(), keyless):
        async with await ReadOnlyMessageStore.open(config, store=backend) as ro:
            with pytest.raises(KeyUnavailable, match="no key for key id 'key-1'") as info:
                await ro.get("t", 0, 0)  # not a corrupt queue: a key it lacks
            assert info.value.key_id == "key-1"
            with pytest.raises(KeyUnavailable):
                await ro.query_by_key("t", "k1")
    with pytest.raises(RecordError, match="compressed or encrypted"):
        decode_record(await first_record(backend), "t", 0)
    with pytest.raises(ConfigError, match=r"encryption_key.*required"):
        await AsyncMessageStore.open(keyless, store=backend)


async def first_record(backend: ObjectStore) -> bytes:
    """The first commit-log record of queue t/0, as stored."""
    async with await ReadOnlyMessageStore.open(small_config(), store=backend) as ro:
        view = await ro.queue("t", 0)
        unit = (await view.units(0, 1))[0]
        return await view.cl.read(unit.position, unit.size)


def test_a_key_provider_reads_records_of_every_key_id() -> None:
    """Rotation: records name the key id they were sealed with."""
    keys = {"2025": b"a" * 32, "2026": b"b" * 16}
    backend = MemoryObjectStore()
    for key_id, first in (("2025", 0), ("2026", 10)):
        config = small_config(encryption="aes-gcm", encryption_key_id=key_id)
        with MessageStore.open(config, store=backend, key_provider=keys.__getitem__) as ms:
            for i in range(first, first + 10):
                ms.append("t", 0, body(i))
            got = ms.get("t", 0, 0, max_count=100)
            assert [m.body for m in got] == [body(i) for i in range(first + 10)]
    del keys["2025"]
    with MessageStore.open(small_config(encryption="aes-gcm", encryption_key_id="2026"),
                           store=backend, key_provider=keys.__getitem__) as ms:
        assert [m.body for m in ms.get("t", 0, 10, max_count=100)] == \
            [body(i) for i in range(10, 20)]
        with pytest.raises(KeyUnavailable, match="key provider failed for key id '2025'"):
            ms.get("t", 0, 0)


def test_a_key_provider_must_be_callable() -> None:
    with pytest.raises(InvalidArgumentType, match="key_provider"):
        MessageStore.open(small_config(), store=MemoryObjectStore(),
                          key_provider="key")  # type: ignore[arg-type]


def _reseal_crc(record: bytearray) -> bytes:
    """The record with its outer CRC32C made right again (what a forger does)."""
    struct.pack_into(">I", record, 8, crc32c(bytes(record[12:])))
    return bytes(record)


@pytest.mark.parametrize("mode", list(MODES))
def test_both_checksums_are_checked(mode: str) -> None:
    codec = RecordCodec.from_config(small_config(**MODES[mode]))
    assert codec is not None
    plain = encode_record(7, 1_700_000_000_000, body(7), keys=["a"], tags="t")
    sealed = codec.seal(plain)
    assert decode_record(sealed, "t", 0, codec).body == body(7)
    flipped = bytearray(sealed)
    flipped[-3] ^= 0x01
    with pytest.raises(RecordError, match="CRC32C"):
        decode_record(bytes(flipped), "t", 0, codec)  # the stored bytes' CRC
    with pytest.raises(RecordError, match=r"authentication|plain bytes|malformed"):
        decode_record(_reseal_crc(flipped), "t", 0, codec)  # the plain bytes' check
    moved = bytearray(sealed)
    struct.pack_into(">Q", moved, 12, 8)  # the same record claimed for offset 8
    if mode != "zstd":
        with pytest.raises(RecordError, match="authentication"):
            decode_record(_reseal_crc(moved), "t", 0, codec)


@pytest.mark.parametrize(("value", "match"), [
    ("not base64!", "must be base64"),
    (base64.b64encode(b"short").decode(), "16, 24 or 32 bytes"),
])
def test_a_bad_key_is_a_config_error_that_does_not_show_it(value: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        small_config(encryption="aes-gcm", encryption_key=value)
    assert value not in str(info.value)


def test_the_config_repr_hides_the_key() -> None:
    config = small_config(**MODES["both"])
    assert KEY not in repr(config) and KEY not in str(config)
    codec = RecordCodec.from_config(config)
    assert KEY not in repr(codec) and "k" * 32 not in repr(codec)
    assert os.environ.get("TIEREDSTORE_ENCRYPTION_KEY") is None



def zstd_frame(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


# What sealing adds to a record (docs/records.md, Commit-log record): plain_len and
# plain_crc32c; encrypted, also the key id ("key-1") with its length, a nonce and a tag.
SEALING = {("none", "none"): 0, ("zstd", "none"): 8,
           ("none", "aes-gcm"): 8 + 2 + 5 + 12 + 16, ("zstd", "aes-gcm"): 8 + 2 + 5 + 12 + 16}


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("encryption", ["none", "aes-gcm"])
async def test_every_body_round_trips_with_every_compression_and_encryption(
        compression: str, encryption: str) -> None:
    """Bodies zstd does not shrink, and the largest the store takes: the whole
    record, as stored, within max_message_size = commit_log_max_size."""
    settings: dict[str, Any] = {"compression": compression, "encryption": encryption,
                                "max_message_size": 32 * KiB, "commit_log_max_size": 32 * KiB}
    if encryption == "aes-gcm":
        settings["encryption_key"] = KEY
    largest = 32 * KiB - MIN_RECORD_SIZE - SEALING[compression, encryption]
    bodies = {"empty": b"", "one byte": b"x", "hello": b"hello",
              "random 4 KiB": os.urandom(4 * KiB),
              "incompressible": zstd_frame(os.urandom(8 * KiB)),
              "largest": os.urandom(largest)}
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(small_config(**settings), store=backend)
    with pytest.raises(MessageTooLarge, match="max_message_size"):
        await store.append("t", 0, os.urandom(largest + 1))
    for k, data in enumerate(bodies.values()):
        assert await store.append("t", 0, data) == k
    await store.flush()
    for attempt in ("in the writer", "after a reopen"):
        got = await store.get("t", 0, 0, max_count=100, max_bytes=2**40)
        assert {name: m.body for name, m in zip(bodies, got, strict=True)} == bodies, attempt
        await store.close()
        store = await AsyncMessageStore.open(small_config(**settings), store=backend)
    await store.close()


def test_a_record_older_stores_sealed_with_flags_0_still_reads() -> None:
    """Before the fix an unshrunk, unencrypted record was written in the sealed
    layout with flags 0: plain_len and plain_crc32c, then the plain tail."""
    plain = encode_record(7, 1_700_000_000_000, b"hello")
    tail = plain[32:]
    fields = plain[12:32] + struct.pack(">II", len(tail), crc32c(tail)) + tail
    old = struct.pack(">III", 12 + len(fields), 0x54534D31, crc32c(fields)) + fields
    message = decode_record(old, "t", 0)
    assert (message.offset, message.body) == (7, b"hello")
