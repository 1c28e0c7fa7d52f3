"""Log format version 2: commit records and checkpoints, read back and folded
into the committed state by its rules; damage and stale listings named."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tieredstore.filetype import FileType
from tieredstore.log import (
    ActiveFile,
    ChunkCommit,
    CommitRecord,
    DataIndex,
    HeadCommit,
    LogCorrupt,
    LogPath,
    Piece,
    QueueState,
    RollCommit,
    Run,
    TimesCommit,
    encode_checkpoint,
    encode_log_object,
    encode_records,
    load_committed,
    read_entry,
    read_index,
)
from tieredstore.log.format import FOOTER_SIZE, HEADER_SIZE
from tieredstore.objectstore import (
    ByteRange,
    ForwardingObjectStore,
    MemoryObjectStore,
    ObjectData,
    ObjectInfo,
)

CL, CQ = FileType.COMMIT_LOG, FileType.CONSUME_QUEUE
PATH = LogPath("c", "b")


def entry(records: list[CommitRecord], pieces: int = 1) -> bytes:
    data, _ = encode_log_object(
        [(Piece("t", q, CL, 0, 0, 3), b"abc") for q in range(pieces)], encode_records(records))
    return data


class Counting(ForwardingObjectStore):
    def __init__(self) -> None:
        super().__init__(MemoryObjectStore())
        self.gets: list[tuple[str, ByteRange | None]] = []
        self.lists = 0

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        self.gets.append((key, byte_range))
        return await super().get_object(key, byte_range)

    async def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        async for page in super().list_pages(prefix):
            self.lists += 1
            yield page


records_st = st.lists(st.one_of(
    st.builds(HeadCommit, st.text(min_size=1, max_size=8), st.integers(0, 2**32 - 1),
              st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1)),
    st.builds(ChunkCommit, st.text(min_size=1, max_size=8), st.integers(0, 2**32 - 1),
              st.sampled_from(list(FileType)), st.integers(0, 2**63), st.integers(0, 2**62),
              st.integers(1, 2**62), st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1)),
    st.builds(RollCommit, st.text(min_size=1, max_size=8), st.integers(0, 2**32 - 1),
              st.sampled_from(list(FileType)), st.integers(0, 2**64 - 1)),
    st.builds(TimesCommit, st.text(min_size=1, max_size=8), st.integers(0, 2**32 - 1),
              st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1),
              st.integers(0, 2**32 - 1))), max_size=10)


@settings(max_examples=60, deadline=None)
@given(records_st)
async def test_records_read_back_beside_the_pieces(records: list[CommitRecord]) -> None:
    store = MemoryObjectStore()
    data = entry(records, pieces=2)
    await store.put("k", data)
    found = await read_entry(store, "k", len(data))
    assert isinstance(found, DataIndex)
    assert found.records == records
    assert [p.queue_id for p in found.pieces] == [0, 1]
    assert data[:HEADER_SIZE] == b"TSLG" + struct.pack(">HH", 2 if records else 1, 0)


async def test_a_version_2_entry_is_refused_by_a_reader_of_pieces_only() -> None:
    store = MemoryObjectStore()
    plain = entry([])
    committed = entry([HeadCommit("t", 0, 1, 7)])
    checkpoint = encode_checkpoint({}, [])
    for key, data in (("plain", plain), ("committed", committed), ("cp", checkpoint)):
        await store.put(key, data)
    assert len(await read_index(store, "plain", len(plain))) == 1
    for key, data in (("committed", committed), ("cp", checkpoint)):
        with pytest.raises(LogCorrupt, match="version 2"):
            await read_index(store, key, len(data))


def state(*records: CommitRecord) -> QueueState:
    from tieredstore.log import CommittedState
    folded = CommittedState()
    folded.fold("k", records)
    return folded[("t", 0)]


def test_chunks_extend_the_active_segment_in_runs_of_generations() -> None:
    got = state(RollCommit("t", 0, CL, 0), ChunkCommit("t", 0, CL, 0, 0, 10, 5, 0),
                ChunkCommit("t", 0, CL, 0, 10, 4, 5, 0), ChunkCommit("t", 0, CL, 0, 14, 2, 9, 0),
                HeadCommit("t", 0, 3, 11), RollCommit("t", 0, CQ, 40),
                ChunkCommit("t", 0, CQ, 40, 0, 20, 9, 0), TimesCommit("t", 0, 100, 200, 1))
    assert got == QueueState(3, 11, {CL: ActiveFile(0, 16, (Run(0, 5), Run(14, 9))),
                                     CQ: ActiveFile(40, 20, (Run(0, 9),))}, 100, 200, 1)
    rolled = state(RollCommit("t", 0, CL, 0), ChunkCommit("t", 0, CL, 0, 0, 10, 5, 0),
                   RollCommit("t", 0, CL, 1000))
    assert rolled.files[CL] == ActiveFile(1000)


@pytest.mark.parametrize("records, broken", [
    ([RollCommit("t", 0, CL, 0), ChunkCommit("t", 0, CL, 0, 4, 2, 1, 0)],
     "does not start at its committed end 0"),
    ([RollCommit("t", 0, CL, 0), ChunkCommit("t", 0, CL, 0, 0, 8, 1, 0),
      ChunkCommit("t", 0, CL, 0, 4, 8, 1, 0)], "does not start at its committed end 8"),
    ([ChunkCommit("t", 0, CL, 0, 0, 2, 1, 0)], "not the active segment"),
    ([RollCommit("t", 0, CL, 0), ChunkCommit("t", 0, CL, 7, 0, 2, 1, 0)],
     "not the active segment"),
    ([RollCommit("t", 0, CL, 0), ChunkCommit("t", 0, CL, 0, 0, 2, 4, 0),
      ChunkCommit("t", 0, CL, 0, 2, 2, 3, 0)], "generation 3, below the 4"),
    ([HeadCommit("t", 0, 4, 0), HeadCommit("t", 0, 4, 0)], "not above the committed 4"),
    ([RollCommit("t", 0, CL, 10), RollCommit("t", 0, CL, 10)], "not above its active"),
])
def test_a_record_that_breaks_a_rule_is_named(records: list[CommitRecord], broken: str) -> None:
    with pytest.raises(LogCorrupt, match=rf"log object k: t/0: .*{broken}"):
        state(*records)


async def put_log(store: ForwardingObjectStore | MemoryObjectStore, seq: int,
                  data: bytes) -> None:
    await store.put(PATH.key(seq), data)


async def test_a_load_reads_the_checkpoint_and_the_entries_that_count() -> None:
    store = Counting()
    queues = {("t", q): state(RollCommit("t", 0, CL, 0), ChunkCommit("t", 0, CL, 0, 0, q + 1, 2, 0),
                              HeadCommit("t", 0, q, q))
              for q in range(500)}
    # Below the checkpoint: entry 1 is live (listed), entry 2 is not: neither its
    # records nor its damage count; above it: entry 4 commits a chunk of queue 3.
    await put_log(store, 0, b"")  # a fence
    await put_log(store, 1, entry([]))
    await put_log(store, 2, entry([ChunkCommit("t", 3, CL, 0, 999, 1, 1, 0)]))
    await put_log(store, 3, encode_checkpoint(queues, [1]))
    await put_log(store, 4, entry([ChunkCommit("t", 3, CL, 0, 4, 6, 7, 0)]))
    loaded = await load_committed(store, PATH)
    assert loaded.checkpoint == 3
    assert [e.seq for e, _ in loaded.entries] == [1, 4]
    assert len(loaded.state) == 500
    assert loaded.state[("t", 3)].files[CL] == ActiveFile(0, 10, (Run(0, 2), Run(4, 7)))
    assert loaded.state[("t", 499)] == queues[("t", 499)]
    # One LIST; the tails from the newest down to the checkpoint (4, then 3 and
    # 2 together), the checkpoint's states in one GET, the live entry's tail.
    assert store.lists == 1
    assert [k for k, _ in store.gets][:1] == [PATH.key(4)]
    assert sorted(k for k, _ in store.gets) == sorted(PATH.key(n) for n in (1, 2, 3, 3, 4))

    await put_log(store, 2, b"damaged")
    assert (await load_committed(store, PATH)).state[("t", 3)] == loaded.state[("t", 3)]

    store.gets.clear()
    few = await load_committed(store, PATH, queues=[("t", 7), ("t", 3), ("x", 1)])
    assert len(few.state) == 2 and few.state[("t", 7)] == queues[("t", 7)]
    assert few.state[("x", 1)] == QueueState()


async def test_a_log_without_a_checkpoint_folds_every_entry() -> None:
    store = MemoryObjectStore()
    await put_log(store, 0, entry([]))  # version 1: pieces only
    await put_log(store, 1, b"")
    await put_log(store, 2, entry([RollCommit("t", 0, CL, 0)]))
    await put_log(store, 3, entry([ChunkCommit("t", 0, CL, 0, 0, 5, 1, 0)]))
    loaded = await load_committed(store, PATH)
    assert loaded.checkpoint is None and [e.seq for e, _ in loaded.entries] == [0, 2, 3]
    assert loaded.state[("t", 0)].files[CL] == ActiveFile(0, 5, (Run(0, 1),))
    await put_log(store, 4, entry([ChunkCommit("t", 0, CL, 0, 6, 5, 1, 0)]))
    with pytest.raises(LogCorrupt, match=r"log-00000000000000000004: t/0: .*committed end 5"):
        await load_committed(store, PATH)


async def test_a_live_id_not_listed_is_a_stale_listing_named_after_three_loads() -> None:
    store = MemoryObjectStore()
    await put_log(store, 5, encode_checkpoint({}, [2]))
    with pytest.raises(LogCorrupt, match=r"gone in 3 loads.*live log id 2"):
        await load_committed(store, PATH)


async def test_damage_in_a_checkpoint_is_named() -> None:
    store = MemoryObjectStore()
    good = encode_checkpoint({("t", 0): state(HeadCommit("t", 0, 1, 1))}, [])
    damaged = bytearray(good)
    damaged[HEADER_SIZE] ^= 1  # the first byte of the state: its CRC fails
    await put_log(store, 0, bytes(damaged))
    with pytest.raises(LogCorrupt, match="state of t/0 fails its CRC32C"):
        await load_committed(store, PATH)
    kind = bytearray(good)
    kind[-FOOTER_SIZE + 6 : -FOOTER_SIZE + 8] = b"\x00\x07"  # an unknown kind, CRC fixed
    from tieredstore.checksum import crc32c
    kind[-4:] = struct.pack(">I", crc32c(bytes(kind[-FOOTER_SIZE:-4])))
    await put_log(store, 0, bytes(kind))
    with pytest.raises(LogCorrupt, match="entry kind 7 is unknown"):
        await load_committed(store, PATH)
