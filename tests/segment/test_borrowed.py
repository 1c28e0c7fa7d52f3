"""A segment's borrowed units (write mode log's pieces) through the chunk write
that takes them in, when its answer is lost."""

from __future__ import annotations

from collections.abc import Mapping

from tieredstore.checksum import crc32c
from tieredstore.errors import CommitFailed, RequestTimeout
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo
from tieredstore.objectstore.chokepoint import Chokepoint, RetryPolicy
from tieredstore.segment import ChunkedSegment, FileType, SegmentPath
from tieredstore.segment.layout import ChunkRef
from tieredstore.segment.reader import DirectReader
from tieredstore.testing import ForwardingObjectStore

PATH = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0)


class LosesChunkReplies(ForwardingObjectStore):
    def __init__(self, inner: MemoryObjectStore) -> None:
        super().__init__(inner)
        self.lose = 0

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        info = await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
        if "/chunk-" in key and self.lose:
            self.lose -= 1
            raise RequestTimeout(f"answer to PUT {key} lost")
        return info


async def test_no_unit_is_swapped_in_while_a_chunk_over_borrowed_units_is_in_doubt() -> None:
    inner = MemoryObjectStore(chokepoint=Chokepoint(RetryPolicy(max_attempts=1)))
    store = LosesChunkReplies(inner)
    pieces = [b"a" * 10, b"b" * 10, b"c" * 10]
    segment = ChunkedSegment(store, PATH, reader=DirectReader(store))
    for i, data in enumerate(pieces):
        key = f"log/log-{i}"
        await inner.put(key, data)
        segment.borrow(ChunkRef(10 * i, 10, key, 0, crc32c(data)))
    store.lose = 1
    try:
        await segment.compact()  # lands, its answer lost: in doubt
    except CommitFailed:
        pass
    else:
        raise AssertionError("the lost answer went unnoticed")
    more = b"d" * 10
    await inner.put("log/log-3", more)
    segment.borrow(ChunkRef(30, 10, "log/log-3", 0, crc32c(more)))
    both = pieces[2] + more  # a consolidated unit straddling the chunk in doubt's end
    await inner.put("log/log-4", both)
    assert segment.swap_borrowed(ChunkRef(20, 20, "log/log-4", 0, crc32c(both))) is None
    await segment.compact()  # the chunk in doubt is found as ours, then [30, 40) moves
    assert [(u.position, u.end) for u in segment.layout.units] == [(0, 30), (30, 40)]
    assert segment.borrowed_bytes == 0
    assert await segment.read0(0, 40) == b"".join(pieces) + more
