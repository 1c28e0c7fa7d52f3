"""Record builders and fault-injecting stores for the metadata tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tieredstore.errors import ServerError
from tieredstore.metadata import COMMIT_LOG, FileType, SegmentRecord
from tieredstore.objectstore import (
    Chokepoint,
    MemoryObjectStore,
    ObjectInfo,
    ObjectStore,
    RetryPolicy,
)
from tieredstore.objectstore.base import ObjectData
from tieredstore.testing import ForwardingObjectStore

T = TypeVar("T")


def record(
    i: int,
    file_type: FileType = COMMIT_LOG,
    *,
    size: int = 100,
    messages: int = 10,
    t0: int = 1_700_000_000_000,
) -> SegmentRecord:
    """The ``i``-th of a run of contiguous, equal segments."""
    return SegmentRecord(
        file_type=file_type,
        base_offset=i * size,
        size=size,
        first_message_offset=i * messages,
        last_message_offset=i * messages + messages - 1,
        begin_timestamp_ms=t0 + i * 1000,
        end_timestamp_ms=t0 + i * 1000 + 999,
        message_count=messages,
        sealed_at_ms=t0 + i * 1000 + 1000,
        crc32c=i,
    )


def bases(records: list[SegmentRecord]) -> list[int]:
    return [r.base_offset for r in records]


class Crash(Exception):
    """The process 'died' here."""


class CrashingStore(MemoryObjectStore):
    """A memory store that dies at its ``crash_at``-th put: before the put lands,
    or (``after``) once it has landed but before its answer gets back."""

    def __init__(self, crash_at: int | None = None, *, after: bool = False) -> None:
        super().__init__()
        self.puts = 0
        self.crash_at = crash_at
        self.after = after
        self.fail_deletes = 0

    def disarm(self) -> None:
        self.crash_at = None

    async def put(
        self,
        key: str,
        data: bytes | memoryview,
        *,
        if_none_match: bool = False,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        self.puts += 1
        dies = self.puts == self.crash_at
        if dies and not self.after:
            raise Crash(f"before put #{self.puts} {key}")
        info = await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
        if dies:
            raise Crash(f"after put #{self.puts} {key}")
        return info

    async def delete_many(self, keys: Sequence[str]) -> None:
        if self.fail_deletes:
            self.fail_deletes -= 1
            raise Crash(f"before delete of {len(keys)} keys")
        await super().delete_many(keys)


class LostAnswerStore(MemoryObjectStore):
    """Head puts land, but the first answer is lost (a 5xx): the chokepoint retries."""

    def __init__(self) -> None:
        super().__init__(chokepoint=Chokepoint(RetryPolicy(base_delay=0.0, max_delay=0.0)))
        self.lose_next = False

    async def _execute(self, op: str, key: str, call: Callable[[], T]) -> T:
        done = await super()._execute(op, key, call)
        if op == "put" and self.lose_next:
            self.lose_next = False
            raise ServerError("answer lost after the put landed", op="put", key=key)
        return done


class DamagedReads(ForwardingObjectStore):
    """The first ``times`` GETs of objects whose key holds ``match`` come back
    damaged by ``damage``."""

    def __init__(self, inner: ObjectStore, match: str, times: int,
                 damage: Callable[[bytes], bytes]) -> None:
        super().__init__(inner)
        self.match, self.times, self.damage = match, times, damage

    async def get_object(self, key: str, byte_range: Any = None) -> ObjectData:
        found = await super().get_object(key, byte_range)
        if self.match in key and self.times > 0:
            self.times -= 1
            return ObjectData(self.damage(found.data), found.info)
        return found
