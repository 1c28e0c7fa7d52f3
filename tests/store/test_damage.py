"""Damage stays local: a bad byte makes only its own range unreadable."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.store.conftest import KiB, small_config
from tieredstore.cli import main
from tieredstore.errors import TieredStoreError
from tieredstore.log import LogSnapshot
from tieredstore.metadata import QueueMetadata, QueuePath
from tieredstore.objectstore import LocalObjectStore, MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.segment import FileType
from tieredstore.store import AsyncMessageStore, NoSuchQueue, QueueCorrupt, ReadOnlyMessageStore
from tieredstore.store.formats.keys import log_path, metadata_root, segment_path
from tieredstore.testing import ForwardingObjectStore

COUNT = 400


def body(offset: int) -> bytes:
    return f"{offset:06d}".encode() * 80


async def build(backend: ObjectStore, write_mode: str = "log") -> None:
    store = await AsyncMessageStore.open(small_config(gc_interval=0, write_mode=write_mode),
                                         store=backend)
    for i in range(COUNT):
        await store.append("t", 0, body(i))
    await store.close()


async def flip(backend: ObjectStore, key: str, at: int) -> None:
    """One byte changed, the object's metadata (its stored CRC) kept."""
    got = await backend.get_object(key)
    data = bytearray(got.data)
    data[at] ^= 0x01
    await backend.put(key, bytes(data), metadata=dict(got.info.metadata))


async def read_around(store: AsyncMessageStore | ReadOnlyMessageStore,
                      ) -> tuple[dict[int, bytes], list[str]]:
    """Read the whole queue a batch at a time, stepping over what cannot be read:
    the messages read, and the errors met (one per unreadable offset)."""
    got: dict[int, bytes] = {}
    errors: list[str] = []
    offset = 0
    while offset < COUNT:
        try:
            batch = await store.get("t", 0, offset, max_count=64)
        except TieredStoreError as exc:
            errors.append(f"{offset}: {exc}")
            offset += 1
            continue
        assert batch, f"no message and no error at {offset}"
        for m in batch:
            got[m.offset] = m.body
        offset = batch[-1].offset + 1
    return got, errors


@pytest.mark.parametrize("file_type", ["commitlog", "consumequeue"])
async def test_one_bad_byte_in_a_merged_segment(file_type: str) -> None:
    backend = MemoryObjectStore()
    await build(backend)
    merged = sorted(o.key for o in await backend.list_all("")
                    if f"/{file_type}/" in o.key and o.key.endswith("/segment"))
    assert len(merged) >= 2
    await flip(backend, merged[1], 100)
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    assert store.corrupt == {}
    got, errors = await read_around(store)
    await store.close()
    if file_type == "consumequeue":  # its units are rebuilt from the commit log
        assert errors == []
        assert got == {i: body(i) for i in range(COUNT)}
        return
    assert errors, "the damage went unnoticed"
    assert all("segment" in e for e in errors), errors
    lost = COUNT - len(got)
    assert lost == len(errors)
    assert 0 < lost <= 64, f"{lost} messages unreadable for one bad byte"
    for offset, data in got.items():
        assert data == body(offset)  # never wrong bytes
    bad = sorted(set(range(COUNT)) - set(got))
    assert bad == list(range(bad[0], bad[-1] + 1)), "the unreadable range is not one range"


async def test_get_returns_the_good_messages_before_a_bad_record() -> None:
    backend = MemoryObjectStore()
    await build(backend)
    merged = sorted(o.key for o in await backend.list_all("")
                    if "/commitlog/" in o.key and o.key.endswith("/segment"))
    await flip(backend, merged[0], 5000)
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    first = await store.get("t", 0, 0, max_count=COUNT)
    assert 0 < len(first) < COUNT
    assert [m.body for m in first] == [body(i) for i in range(len(first))]
    with pytest.raises(TieredStoreError, match="segment"):
        await store.get("t", 0, len(first), max_count=COUNT)
    await store.close()


def active_chunks(keys: list[str], file_type: str) -> list[str]:
    """The data chunks of the queue's active (last) segment of ``file_type``."""
    chunks = [k for k in keys if f"/{file_type}/" in k and "/chunk-" in k]
    last = chunks[-1].rsplit("/", 1)[0]
    return [k for k in chunks if k.startswith(last + "/")]


async def empty(backend: ObjectStore, key: str) -> None:
    """The chunk cut to zero bytes, its metadata kept."""
    got = await backend.get_object(key)
    await backend.put(key, b"", metadata=dict(got.info.metadata))


AFTER = 100  # messages appended after the damage: enough to roll both files

# (what is done, to which chunk of the active segment, most messages it may cost,
# write mode). In the log mode the active consume queue's units are in log pieces
# (their damage: tests/log/test_log_mode.py); its commit log's pieces before the last
# full chunk are in chunks.
ACTIVE_DAMAGE = [
    ("flip", "consumequeue", 0, 0, "direct"),  # units rebuilt from the commit log
    ("delete", "consumequeue", 0, 0, "direct"),
    ("empty", "consumequeue", 0, 0, "direct"),
    *[(action, "commitlog", index, 12, mode)
      for mode in ("direct", "log")
      for action, index in [
          ("flip", 1), ("delete", 1), ("empty", 1),  # one 4 KiB chunk of ~500-byte records
          ("delete", -1), ("empty", -1),  # the last chunk: the writer goes on after it
      ]],
]


@pytest.mark.parametrize(("action", "file_type", "index", "most_lost", "write_mode"),
                         ACTIVE_DAMAGE)
async def test_damage_in_the_active_segment_stays_local(action: str, file_type: str,
                                                        index: int, most_lost: int,
                                                        write_mode: str) -> None:
    backend = MemoryObjectStore()
    await build(backend, write_mode)
    keys = sorted(o.key for o in await backend.list_all(""))
    chunks = active_chunks(keys, file_type)
    assert len(chunks) >= (1 if file_type == "consumequeue" else 3)
    key = chunks[index]
    if action == "flip":
        await flip(backend, key, 5)
    elif action == "delete":
        await backend.delete(key)
    else:
        await empty(backend, key)

    config = small_config(gc_interval=0, write_mode=write_mode)
    store = await AsyncMessageStore.open(config, store=backend)
    assert store.corrupt == {}
    got, errors = await read_around(store)
    lost = COUNT - len(got)
    assert lost == len(errors) <= most_lost, errors
    assert all("commitlog" in e and ("missing" in e or "CRC32C" in e) for e in errors), errors
    if file_type == "commitlog":
        assert lost > 0, "the damage went unnoticed"
        bad = sorted(set(range(COUNT)) - set(got))
        assert bad == list(range(bad[0], bad[-1] + 1)), "the unreadable range is not one range"
    for offset, data in got.items():
        assert data == body(offset)  # never wrong bytes
    # The same store object goes on writing (past a roll, which seals the damaged
    # segment: it cannot be merged and stays readable as chunks), and a reopen
    # reads it all back.
    for i in range(AFTER):
        assert await store.append("t", 0, body(COUNT + i)) == COUNT + i
    await store.flush()
    await store.close()
    again = await AsyncMessageStore.open(config, store=backend)
    assert again.corrupt == {}
    after = await again.get("t", 0, COUNT, max_count=AFTER)
    assert [m.body for m in after] == [body(COUNT + i) for i in range(AFTER)]
    assert sorted(o for o in (await read_around(again))[0] if o < COUNT) == sorted(got)
    await again.close()


async def test_a_reader_reads_around_lost_last_chunks_as_the_writer_does() -> None:
    """The last chunk of the active commit-log segment gone, log pieces after it:
    a read-only store reads the same messages as the writer, and names the rest."""
    backend = MemoryObjectStore()
    await build(backend)
    keys = sorted(o.key for o in await backend.list_all(""))
    await backend.delete(active_chunks(keys, "commitlog")[-1])
    async with await AsyncMessageStore.open_read_only(small_config(), store=backend) as reader:
        read_only = await read_around(reader)
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    writer = await read_around(store)
    await store.close()
    got, errors = read_only
    assert 0 < len(errors) <= 12 and all("missing" in e for e in errors), errors
    assert set(got) | {int(e.split(":")[0]) for e in errors} == set(range(COUNT))
    assert read_only == writer


class _HidesOnce(ForwardingObjectStore):
    """The first ``times`` listings of ``key``'s directory leave ``key`` out (a listing
    is no snapshot)."""

    def __init__(self, inner: ObjectStore, key: str, times: int) -> None:
        super().__init__(inner)
        self.key, self.times, self.listings = key, times, 0

    async def _pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        hide = self.key.startswith(prefix) and self.listings < self.times
        if self.key.startswith(prefix):
            self.listings += 1
        async for page in self.inner.list_pages(prefix):
            yield [o for o in page if not (hide and o.key == self.key)]

    def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        return self._pages(prefix)


@pytest.mark.parametrize("times", [1, 2])
async def test_a_last_chunk_a_listing_missed_is_no_hole(times: int) -> None:
    """The last chunk of the active commit-log segment, left out of the open's
    listing (and of the next one): the writer's claim creates its fence at the
    missed chunk's id, finds it taken and lists again, so the bytes up to the log
    pieces are not taken for lost."""
    backend = MemoryObjectStore()
    await build(backend)
    keys = sorted(o.key for o in await backend.list_all(""))
    last = active_chunks(keys, "commitlog")[-1]
    config = small_config(gc_interval=0)
    store = await AsyncMessageStore.open(config, store=_HidesOnce(backend, last, times))
    got, errors = await read_around(store)
    assert errors == []
    assert got == {i: body(i) for i in range(COUNT)}
    assert await store.append("t", 0, body(COUNT)) == COUNT
    await store.close()
    again = await AsyncMessageStore.open(config, store=backend)
    got, errors = await read_around(again)
    assert errors == []
    assert got == {i: body(i) for i in range(COUNT + 1)}
    await again.close()


def test_verify_names_a_damaged_consume_queue_range_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    backend = LocalObjectStore(str(tmp_path))

    async def damage() -> None:
        await build(backend, "direct")  # the active consume queue's units in chunks
        keys = sorted(o.key for o in await backend.list_all(""))
        await flip(backend, active_chunks(keys, "consumequeue")[0], 5)

    asyncio.run(damage())
    config = tmp_path / "small.toml"
    config.write_text('[segments]\nchunk_size = "4KiB"\ncommit_log_max_size = "32KiB"\n'
                      'consume_queue_max_size = "2KiB"\n[store]\nmetadata_page_size = 4\n')
    code = main(["verify", "--config", str(config), "--data-dir", str(tmp_path)])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code == 1
    assert "messages 384, errors 1" in out, out
    assert "offsets [384, 400): consume-queue units unreadable" in out, out


async def test_a_corrupt_queue_takes_no_append_but_what_is_intact_reads() -> None:
    backend = MemoryObjectStore()
    await build(backend)
    # Damage only the store's bookkeeping: clean records would resume past the end.
    meta = await QueueMetadata.open(backend, QueuePath(metadata_root(small_config()), "t", 0),
                                    writer_id="test")
    await meta.set_properties({"clean_from.commitlog": str(10**9)})
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    await store.wait_idle()  # its claim, in the background, finds the queue corrupt
    assert set(store.corrupt) == {("t", 0)}
    with pytest.raises(QueueCorrupt, match="past the commit log's end"):
        await store.append("t", 0, b"more")
    assert (await store.min_offset("t", 0), await store.max_offset("t", 0)) == (0, COUNT)
    got, errors = await read_around(store)
    assert errors == [] and got == {i: body(i) for i in range(COUNT)}
    await store.close()


async def test_a_read_only_store_reads_without_writing() -> None:
    backend = MemoryObjectStore()
    await build(backend)
    before = sorted((o.key, o.size) for o in await backend.list_all(""))
    async with await AsyncMessageStore.open_read_only(small_config(), store=backend) as reader:
        assert await reader.queues() == [("t", 0)]
        assert (await reader.min_offset("t", 0), await reader.max_offset("t", 0)) == (0, COUNT)
        messages = await reader.get("t", 0, 10, max_count=5)
        assert [m.body for m in messages] == [body(i) for i in range(10, 15)]
        with pytest.raises(NoSuchQueue):
            await reader.get("nope", 0, 0)
        assert sorted((o.key, o.size) for o in await backend.list_all("")) == before
        # A writer appends meanwhile: a read past what was seen lists again.
        writer = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
        await writer.append("t", 0, b"later")
        await writer.flush()
        assert [m.body for m in await reader.get("t", 0, COUNT)] == [b"later"]
        await writer.close()


async def test_a_lost_log_object_between_live_pieces_is_a_hole_not_a_corrupt_queue() -> None:
    """Log pieces of the active commit-log segment in many log objects, one in the
    middle gone: its bytes are a hole, the pieces after it read, the writer goes
    on, compaction writes chunks on both sides of the hole, and a read-only store
    reads what the writer reads."""
    backend = MemoryObjectStore()
    config = small_config(gc_interval=0, chunk_size=256 * KiB, commit_log_max_size=1024 * KiB,
                          pool_bytes=1024 * KiB)
    store = await AsyncMessageStore.open(config, store=backend)
    for i in range(COUNT):
        await store.append("t", 0, body(i))
        if i % 10 == 9:
            await store.flush()  # one log object each: every piece stays in the log
    await store.close()
    snapshot = await LogSnapshot.load(backend, log_path(config))
    path = segment_path(config, "t", 0, FileType.COMMIT_LOG, 0)
    pieces = sorted(snapshot.of(path), key=lambda u: u.position)
    assert len(pieces) >= 20
    lost = pieces[len(pieces) // 2]
    await backend.delete(lost.key)

    store = await AsyncMessageStore.open(config, store=backend)
    assert store.corrupt == {}
    got, errors = await read_around(store)
    assert 0 < len(errors) <= 12 and all("missing" in e for e in errors), errors
    bad = sorted(set(range(COUNT)) - set(got))
    assert bad == list(range(bad[0], bad[-1] + 1)), "the unreadable range is not one range"
    assert all(data == body(offset) for offset, data in got.items())
    for i in range(AFTER):
        assert await store.append("t", 0, body(COUNT + i)) == COUNT + i
    await store.flush()
    await store.compact_log(time.time() + 10 * 86_400)  # the pieces move into chunks
    await store.close()
    chunks = [k for k in await keys_of(backend, path.base_dir) if "/chunk-" in k]
    assert any(int(k.rsplit("-", 1)[-1]) >= lost.end for k in chunks), chunks

    async with await AsyncMessageStore.open_read_only(config, store=backend) as reader:
        read_only, read_only_errors = await read_around(reader)
    again = await AsyncMessageStore.open(config, store=backend)
    assert again.corrupt == {}
    reopened, reopened_errors = await read_around(again)
    for found, found_errors in ((read_only, read_only_errors), (reopened, reopened_errors)):
        assert {o: d for o, d in found.items() if o < COUNT} == got
        assert [e.split(":")[0] for e in found_errors] == [e.split(":")[0] for e in errors]
    after = await again.get("t", 0, COUNT, max_count=AFTER)
    assert [m.body for m in after] == [body(COUNT + i) for i in range(AFTER)]
    await again.close()


async def keys_of(backend: ObjectStore, prefix: str) -> list[str]:
    return [o.key for o in await backend.list_all(prefix) if o.size]
