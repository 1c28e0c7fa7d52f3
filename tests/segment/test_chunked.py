"""ChunkedSegment on every backend: commits, reads, seal by merge, recovery, fencing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import pytest

from tests.segment.helpers import KiB, MiB, keys, open_segment, payload, seg_path
from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import (
    CommitPositionError,
    CorruptSegment,
    IntegrityError,
    ReadOutOfRange,
    SegmentFenced,
    SegmentFull,
    SegmentSealed,
)
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.segment import ChunkedSegment, SegmentOptions, SegmentState


async def test_commits_read_back_across_chunks(store: ObjectStore) -> None:
    seg = await open_segment(store, chunk_size=64 * KiB)
    data = payload(300 * KiB)
    await seg.commit0(0, data[: 100 * KiB])
    await seg.commit0(100 * KiB, data[100 * KiB :])
    assert seg.commit_position == len(data)
    assert await seg.read0(0, len(data)) == data
    assert await seg.read0(63 * KiB, 70 * KiB) == data[63 * KiB : 133 * KiB]
    # Chunks are named by position and at most chunk_size.
    names = await keys(store, seg.path.base_dir)
    assert names[0] == "chunk-00000000000000000000" and len(names) == 6


async def test_seal_merges_default_4mib_chunks_under_the_5mib_part_minimum(
    store: ObjectStore,
) -> None:
    """4 MiB chunks cannot be copied as non-last parts: the merge re-uploads them."""
    seg = await open_segment(store, chunk_size=4 * MiB)
    data = payload(13 * MiB + 123, seed=1)
    await seg.commit0(0, data)
    await seg.seal()
    assert seg.merged and seg.last_merge is not None
    assert seg.last_merge.copy_parts == 0
    assert await keys(store, seg.path.base_dir) == ["segment"]
    assert await seg.read0(0, len(data)) == data
    assert await store.list_multipart_uploads(seg.path.base_dir) == []
    reopened = await ChunkedSegment.open(store, seg.path)
    assert reopened.merged and reopened.commit_position == len(data)
    assert await reopened.read0(5 * MiB, 3 * MiB) == data[5 * MiB : 8 * MiB]


async def test_seal_copies_big_chunks_server_side(store: ObjectStore) -> None:
    seg = await open_segment(store, chunk_size=6 * MiB)
    data = payload(12 * MiB + 10, seed=2)
    await seg.commit0(0, data)
    await seg.seal()
    assert seg.last_merge is not None
    assert seg.last_merge.copy_parts == 2 and seg.last_merge.bytes_copied == 12 * MiB
    assert (await ChunkedSegment.open(store, seg.path)).commit_position == len(data)
    assert await seg.read0(0, len(data)) == data


async def test_commit_at_the_wrong_position_carries_the_resume_position(
    fast_store: ObjectStore,
) -> None:
    seg = await open_segment(fast_store)
    await seg.commit0(0, b"abc")
    with pytest.raises(CommitPositionError) as info:
        await seg.commit0(10, b"x")
    assert info.value.resume_position == 3
    assert "commit position is 3" in str(info.value)


async def test_reads_outside_the_commit_position_are_refused(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store)
    await seg.commit0(0, b"hello")
    with pytest.raises(ReadOutOfRange, match=r"\[3, 9\) outside \[0, 5\)"):
        await seg.read0(3, 6)
    assert await seg.read0(5, 0) == b""


async def test_sealed_segment_refuses_commits(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store)
    await seg.commit0(0, b"abc")
    await seg.seal()
    await seg.seal()  # idempotent
    with pytest.raises(SegmentSealed):
        await seg.commit0(3, b"d")


async def test_max_size_is_enforced(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store, max_size=10)
    await seg.commit0(0, b"0123456789")
    with pytest.raises(SegmentFull):
        await seg.commit0(10, b"x")


async def test_empty_segment_seals_and_recovers(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store)
    await seg.seal()
    again = await ChunkedSegment.open(fast_store, seg.path)
    assert again.merged and again.commit_position == 0


async def test_retry_of_a_chunk_that_landed_succeeds(fast_store: ObjectStore) -> None:
    """The first attempt landed but its answer was lost: this handle's own entry."""
    data = b"x" * 100
    seg = ChunkedSegment(fast_store, seg_path())  # believes the segment is empty
    await fast_store.put(seg_path().chunk_key(0), data, if_none_match=True,
                         metadata={"crc32c": format_crc(crc32c(data)), "writer": seg.writer_id})
    await seg.commit0(0, data)
    assert seg.commit_position == 100 and not seg.fenced


async def test_same_bytes_from_another_writer_fence(fast_store: ObjectStore) -> None:
    """Identical bytes are not enough: the entry must carry this handle's writer id."""
    data = b"x" * 100
    await fast_store.put(seg_path().chunk_key(0), data, if_none_match=True,
                         metadata={"crc32c": format_crc(crc32c(data)), "writer": "someone"})
    seg = ChunkedSegment(fast_store, seg_path())
    with pytest.raises(SegmentFenced, match="another writer"):
        await seg.commit0(0, data)


async def test_the_newest_open_takes_the_segment_over(fast_store: ObjectStore) -> None:
    old = await open_segment(fast_store)
    await old.commit0(0, b"old writer ")
    new = await ChunkedSegment.open(fast_store, seg_path(), claim=True)
    assert new.commit_position == 11
    with pytest.raises(SegmentFenced, match="newer writer"):
        await old.commit0(11, b"zombie")
    with pytest.raises(SegmentFenced):
        await old.seal()
    await new.commit0(11, b"new writer")
    reread = await open_segment(fast_store)
    assert await reread.read0(0, 21) == b"old writer new writer"
    assert reread.commit_position == 21


class BeforeFirstFence(MemoryObjectStore):
    """Runs ``hook`` once, just before the first fence entry is created: what the
    old writer does between the new writer's listing and its fence."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[], Awaitable[None]] | None = None

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        if self.hook is not None and (metadata or {}).get("entry") == "fence":
            hook, self.hook = self.hook, None
            await hook()
        return await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


async def test_a_takeover_fences_a_writer_whose_chunk_landed_first() -> None:
    """The old writer's chunk lands between the new writer's listing and its fence:
    the fence goes after it, and that chunk stays (it may have been acknowledged)."""
    store = BeforeFirstFence()
    old = await open_segment(store)
    await old.commit0(0, b"one ")
    store.hook = lambda: old.commit0(4, b"two ")
    new = await ChunkedSegment.open(store, seg_path(), claim=True)  # listed 4 bytes
    assert new.commit_position == 8
    with pytest.raises(SegmentFenced):
        await old.commit0(8, b"three")
    await new.commit0(8, b"new")
    assert await (await open_segment(store)).read0(0, 11) == b"one two new"


async def test_a_seal_and_a_takeover_cannot_both_win() -> None:
    store = BeforeFirstFence()
    old = await open_segment(store)
    await old.commit0(0, b"data")
    store.hook = lambda: old.seal(merge=False)  # the seal takes the id the fence wanted
    new = await ChunkedSegment.open(store, seg_path(), claim=True,
                                    options=SegmentOptions(merge_on_seal=False))
    assert new.sealed and not new.fenced
    with pytest.raises(SegmentSealed):
        await new.commit0(4, b"more")
    again = await open_segment(store, merge_on_seal=False)
    assert again.sealed and again.commit_position == 4


async def test_a_seal_entry_without_its_marker_still_means_sealed(
        fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store, merge_on_seal=False)
    await seg.commit0(0, b"data")
    await seg.seal(merge=False)
    await fast_store.delete(seg_path().sealed_key)  # a crash between the entry and the marker
    again = await open_segment(fast_store)  # merges, as a writer's open does
    assert again.merged and await again.read0(0, 4) == b"data"
    assert await keys(fast_store, seg_path().base_dir) == ["segment"]


async def test_recovery_lists_past_one_thousand_chunks(store: ObjectStore) -> None:
    seg = await open_segment(store, chunk_size=16)
    data = payload(1003 * 16 + 5, seed=3)
    await seg.commit0(0, data)
    reopened = await ChunkedSegment.open(store, seg.path)
    assert reopened.commit_position == len(data)
    assert len(reopened.layout) == 1004
    assert await reopened.read0(16 * 990, 100) == data[16 * 990 : 16 * 990 + 100]


async def test_a_gap_is_a_hole_only_its_range_fails(fast_store: ObjectStore) -> None:
    """A chunk gone from the bucket between two that are there: the segment opens,
    reading the hole names its range, the rest reads, writing goes on, and a
    merge refuses (the segment stays readable as chunks)."""
    seg = await open_segment(fast_store, chunk_size=10)
    await seg.commit0(0, b"a" * 10 + b"b" * 10 + b"c" * 15)
    await fast_store.delete(seg.path.chunk_key(10))
    again = await ChunkedSegment.open(fast_store, seg.path, claim=True)
    assert again.commit_position == 35
    assert [(u.position, u.end) for u in again.layout.holes] == [(10, 20)]
    with pytest.raises(CorruptSegment, match=r"bytes \[10, 20\) are missing") as caught:
        await again.read0(5, 10)
    assert caught.value.span == (10, 20)
    assert await again.read0(0, 10) == b"a" * 10
    assert await again.read0(20, 15) == b"c" * 15
    await again.commit0(35, b"d" * 5)
    with pytest.raises(CorruptSegment, match="cannot merge"):
        await again.seal()
    reopened = await ChunkedSegment.open(fast_store, seg.path, repair=False)
    assert await reopened.read0(20, 20) == b"c" * 15 + b"d" * 5
    assert [(u.position, u.end) for u in reopened.layout.holes] == [(10, 20)]


async def test_an_overlap_is_reported(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store, chunk_size=10)
    await seg.commit0(0, b"a" * 20)
    await fast_store.put(seg.path.chunk_key(5), b"b" * 10)
    with pytest.raises(CorruptSegment, match="overlaps"):
        await ChunkedSegment.open(fast_store, seg.path)


async def test_a_foreign_key_is_named_and_left_alone(fast_store: ObjectStore) -> None:
    """Someone else's object in a segment's prefix is read around, never deleted."""
    seg = await open_segment(fast_store)
    await seg.commit0(0, b"abc")
    await fast_store.put(seg.path.base_dir + "notes.txt", b"hello")
    again = await ChunkedSegment.open(fast_store, seg.path)
    assert again.foreign == [seg.path.base_dir + "notes.txt"]
    assert await again.read0(0, 3) == b"abc"
    await again.commit0(3, b"def")
    await again.seal()
    merged = await ChunkedSegment.open(fast_store, seg.path)
    assert merged.merged and await merged.read0(0, 6) == b"abcdef"
    assert await fast_store.get(seg.path.base_dir + "notes.txt") == b"hello"


async def test_corrupt_chunk_bytes_raise_instead_of_returning_them(
    fast_store: ObjectStore,
) -> None:
    seg = await open_segment(fast_store)
    await seg.commit0(0, b"good bytes")
    info = await fast_store.head(seg.path.chunk_key(0))
    await fast_store.put(seg.path.chunk_key(0), b"evil bytes", metadata=info.metadata)
    reopened = await ChunkedSegment.open(fast_store, seg.path)
    with pytest.raises(IntegrityError, match="CRC32C"):
        await reopened.read0(0, 10)


async def test_missing_crc_metadata_is_an_integrity_error(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store)
    await fast_store.put(seg.path.chunk_key(0), b"no checksum")
    reopened = await ChunkedSegment.open(fast_store, seg.path)
    with pytest.raises(IntegrityError, match="no crc32c metadata"):
        await reopened.read0(0, 3)


async def test_interrupted_merge_is_resumed_on_open(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store, chunk_size=2 * MiB)
    data = payload(7 * MiB, seed=4)
    await seg.commit0(0, data)
    # A crash after the marker and after a multipart upload began.
    await fast_store.put(seg.path.sealed_key, b'{"size": %d}' % len(data))
    await fast_store.create_multipart(seg.path.merged_key)
    reopened = await ChunkedSegment.open(fast_store, seg.path)
    assert reopened.merged
    assert await keys(fast_store, seg.path.base_dir) == ["segment"]
    assert await fast_store.list_multipart_uploads(seg.path.base_dir) == []
    assert await reopened.read0(0, len(data)) == data


async def test_leftover_chunks_after_a_merge_are_deleted_on_open(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store, chunk_size=1 * MiB)
    data = payload(3 * MiB, seed=5)
    await seg.commit0(0, data)
    chunk_objects = {k: await fast_store.get_object(k)
                     for k in [o.key for o in await fast_store.list_all(seg.path.base_dir)]}
    await seg.seal()
    for key, obj in chunk_objects.items():  # as if the cleanup never ran
        await fast_store.put(key, obj.data, metadata=obj.info.metadata)
    await fast_store.put(seg.path.sealed_key, b'{"size": %d}' % len(data))
    reopened = await ChunkedSegment.open(fast_store, seg.path)
    assert reopened.merged
    assert await keys(fast_store, seg.path.base_dir) == ["segment"]


async def test_sealed_marker_with_missing_tail_is_corrupt(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store, chunk_size=10)
    await seg.commit0(0, b"x" * 25)
    await fast_store.put(seg.path.sealed_key, b'{"size": 40}')
    with pytest.raises(CorruptSegment, match=r"\[25, 40\) are missing"):
        await ChunkedSegment.open(fast_store, seg.path)


async def test_destroy_removes_everything(store: ObjectStore) -> None:
    seg = await open_segment(store, chunk_size=1 * KiB)
    await seg.commit0(0, payload(5 * KiB))
    await seg.destroy()
    assert await store.list_all(seg.path.base_dir) == []


async def test_failed_merge_aborts_its_upload_and_can_be_retried() -> None:
    class FailingCopyStore(MemoryObjectStore):
        fail = True

        async def complete_multipart(self, *args: object, **kw: object):  # type: ignore[no-untyped-def]
            if self.fail:
                self.fail = False
                raise RuntimeError("injected failure at complete")
            return await super().complete_multipart(*args, **kw)  # type: ignore[arg-type]

    store = FailingCopyStore()
    seg = await ChunkedSegment.open(store, seg_path(), options=SegmentOptions(chunk_size=MiB))
    data = payload(6 * MiB, seed=6)
    await seg.commit0(0, data)
    with pytest.raises(RuntimeError, match="injected"):
        await seg.seal()
    assert await store.list_multipart_uploads("") == []
    assert seg.sealed and not seg.merged
    reopened = await ChunkedSegment.open(store, seg.path)  # resumes the merge
    assert reopened.merged and await reopened.read0(0, len(data)) == data
    assert (await ChunkedSegment.open(store, seg.path)).layout.units[0].key.endswith("/segment")
    assert seg.path is not None and SegmentState.SEALED.value == "sealed"


async def test_seal_without_merge_is_durable_and_finished_later(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store, chunk_size=10)
    await seg.commit0(0, b"x" * 25)
    await seg.seal(merge=False)
    assert seg.sealed and not seg.merged
    with pytest.raises(SegmentSealed):
        await seg.commit0(25, b"y")
    assert "sealed" in await keys(fast_store, seg.path.base_dir)
    await seg.seal()
    assert seg.merged and await keys(fast_store, seg.path.base_dir) == ["segment"]


async def test_a_reader_follows_a_merge_made_by_another_process(fast_store: ObjectStore) -> None:
    writer = await open_segment(fast_store, chunk_size=1 * KiB)
    data = payload(5 * KiB, seed=8)
    await writer.commit0(0, data)
    await writer.seal(merge=False)
    reader = await ChunkedSegment.open(fast_store, writer.path, repair=False,
                                       options=SegmentOptions(chunk_size=KiB))
    assert not reader.merged
    uploads_before = await fast_store.list_multipart_uploads("")
    await writer.seal()  # the writer merges; the reader still lists chunks
    assert await reader.read0(0, len(data)) == data
    assert reader.merged
    assert uploads_before == []


async def test_a_read_only_open_changes_nothing(fast_store: ObjectStore) -> None:
    seg = await open_segment(fast_store, chunk_size=1 * KiB)
    await seg.commit0(0, payload(3 * KiB))
    await seg.seal(merge=False)
    upload = await fast_store.create_multipart(seg.path.merged_key)  # a merge under way
    before = [o.key for o in await fast_store.list_all("")]
    reader = await ChunkedSegment.open(fast_store, seg.path, repair=False)
    assert reader.sealed and not reader.merged
    assert [o.key for o in await fast_store.list_all("")] == before
    assert [u.upload_id for u in await fast_store.list_multipart_uploads("")] == [upload]
