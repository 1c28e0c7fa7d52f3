"""The one queue scan, where a strict read meets a consume-queue segment that
cannot be opened after a good one: the messages before it come back once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tieredstore.errors import TieredStoreError
from tieredstore.store import QueueScan
from tieredstore.store.record import UNIT_SIZE, CqUnit, encode_record, encode_unit, tags_hash

RECORDS = [encode_record(i, 1000 + i, b"m%d" % i) for i in range(6)]
COMMIT_LOG = b"".join(RECORDS)
UNITS = [CqUnit(sum(map(len, RECORDS[:i])), len(r), tags_hash(None), 1000 + i)
         for i, r in enumerate(RECORDS)]
CONSUME_QUEUE = b"".join(map(encode_unit, UNITS))


class CommitLog:
    async def segment_at(self, position: int, size: int = 1) -> tuple[Any, int]:
        return SimpleNamespace(path="cl@0"), len(COMMIT_LOG)

    def view_end(self, segment: Any, end: int, position: int) -> int:
        return end

    async def read(self, position: int, size: int, **_: Any) -> bytes:
        return COMMIT_LOG[position:position + size]


class ConsumeQueue:
    """Units 0..2 in a first segment; the one from unit 3 on cannot be opened."""

    async def segment_at(self, position: int, size: int = 1) -> tuple[Any, int]:
        if position < 3 * UNIT_SIZE:
            return SimpleNamespace(path="cq@0"), 3 * UNIT_SIZE
        raise TieredStoreError("the consume-queue segment at unit 3 cannot be opened")

    def is_open(self, segment: Any) -> bool:
        return False

    def problem(self, segment: Any) -> str | None:
        return None

    async def read(self, position: int, size: int, **_: Any) -> bytes:
        return CONSUME_QUEUE[position:position + size]


async def test_a_strict_read_stopped_by_the_next_segment_returns_each_message_once() -> None:
    for chained in (False, True):
        scan = QueueScan("t", 0, cl=CommitLog(), cq=ConsumeQueue(), codec=None, first=0,
                         end=6, chained=chained)  # type: ignore[arg-type]
        messages = await scan.read()
        assert [m.offset for m in messages] == [0, 1, 2], chained
        assert scan.next_offset == 3, "the next read from there names the problem"
