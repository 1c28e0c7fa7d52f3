"""The one queue scan: a strict read that meets a consume-queue segment that
cannot be opened after a good one returns the messages before it once; a
Spark slice's columns hold what a verify's messages hold; a spec's mode and
its fields agree."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from tieredstore.errors import TieredStoreError
from tieredstore.store import QueueScan, ScanSpec
from tieredstore.store.formats.record import (
    UNIT_SIZE,
    CqUnit,
    encode_record,
    encode_unit,
    tags_hash,
)
from tieredstore.store.read.scan import ScanMode

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
    scan = QueueScan(ScanSpec.for_get("t", 0, 0, 6, codec=None, max_bytes=1 << 20),
                     cl=CommitLog(), cq=ConsumeQueue())  # type: ignore[arg-type]
    messages = await scan.read()
    assert [m.offset for m in messages] == [0, 1, 2]
    assert scan.next_offset == 3, "the next read from there names the problem"
    # A Spark slice (every unit checked, in columns): the same rows, then the error.
    scan = QueueScan(ScanSpec.for_slice("t", 0, 0, 6, codec=None, wants=None),
                     cl=CommitLog(), cq=ConsumeQueue())  # type: ignore[arg-type]
    rows: list[int] = []
    try:
        async for batch in scan.batches():
            assert batch.columns is not None
            rows += [m.offset for m in batch.columns.messages()]
    except TieredStoreError as exc:
        assert "unit 3 cannot be opened" in str(exc), exc
    else:
        raise AssertionError("the slice read past a segment that cannot be opened")
    assert rows == [0, 1, 2]


def _queue(records: list[bytes], units: list[CqUnit]) -> tuple[Any, Any]:
    """A commit log and a one-segment consume queue over ``records`` and ``units``."""
    log, queue = b"".join(records), b"".join(map(encode_unit, units))

    class Log(CommitLog):
        async def segment_at(self, position: int, size: int = 1) -> tuple[Any, int]:
            return SimpleNamespace(path="cl@0"), len(log)

        async def read(self, position: int, size: int, **_: Any) -> bytes:
            return log[position:position + size]

    class Queue(ConsumeQueue):
        async def segment_at(self, position: int, size: int = 1) -> tuple[Any, int]:
            return SimpleNamespace(path="cq@0"), len(queue)

        async def read(self, position: int, size: int, **_: Any) -> bytes:
            return queue[position:position + size]

    return Log(), Queue()


def _mixed() -> tuple[list[bytes], list[CqUnit]]:
    """Plain records, around records with tags, keys or properties and empty bodies."""
    records, units, at = [], [], 0
    for i in range(40):
        kind = {7: {"tags": "a"}, 8: {"keys": ("k1", "k2")}, 20: {"properties": {"p": "v"}},
                21: {"tags": "b", "keys": ("k",)}}.get(i, {})
        record = encode_record(i, 5000 + i, b"" if i % 9 == 0 else bytes([i]) * (i * 13),
                               **kind)  # type: ignore[arg-type]
        units.append(CqUnit(at, len(record), tags_hash(kind.get("tags")),  # type: ignore[arg-type]
                            5000 + i))
        records.append(record)
        at += len(record)
    return records, units


async def _scan(records: list[bytes], units: list[CqUnit], *, columns: bool,
                wants: Callable[[int, int], bool] | None = None) -> list[Any]:
    """A Spark slice's rows (``columns``), or the messages a verify reads, its
    first problem raised and ``wants`` applied after."""
    cl, cq = _queue(records, units)
    spec = (ScanSpec.for_slice("t", 3, 0, len(units), codec=None, wants=wants) if columns
            else ScanSpec.for_check("t", 3, 0, len(units), codec=None))
    out: list[Any] = []
    async for batch in QueueScan(spec, cl=cl, cq=cq).batches():
        if batch.errors:
            raise batch.errors[0]
        if columns:
            assert batch.columns is not None and not batch.messages
            out += batch.columns.messages()
        else:
            out += [m for m in batch.messages if wants is None or wants(m.offset,
                                                                       m.store_timestamp)]
    return out


async def test_a_columns_scan_returns_what_a_message_scan_returns() -> None:
    records, units = _mixed()
    want = await _scan(records, units, columns=False)
    assert [m.offset for m in want] == list(range(40))
    assert want[7].tags == "a" and want[8].keys == ("k1", "k2") and want[20].properties
    assert await _scan(records, units, columns=True) == want
    # With a row filter, which drops units before their record is read.
    got = await _scan(records, units, columns=True, wants=lambda offset, _: offset % 3 != 1)
    assert got == [m for m in want if m.offset % 3 != 1]


async def test_a_columns_scan_fails_on_a_damaged_record_as_a_message_scan_does() -> None:
    records, units = _mixed()
    for damaged in (3, 8):  # a plain record, a record with keys
        broken = list(records)
        broken[damaged] = broken[damaged][:-1] + bytes([broken[damaged][-1] ^ 1])
        errors = []
        for columns in (False, True):
            try:
                await _scan(broken, units, columns=columns)
            except TieredStoreError as exc:
                errors.append(str(exc))
        assert len(errors) == 2 and errors[0] == errors[1], errors
        assert f"offset {damaged}" in errors[0] and "CRC32C" in errors[0], errors
    # A unit that does not match its record (a store time off by one).
    units[5] = units[5]._replace(store_timestamp=units[5].store_timestamp + 1)
    for columns in (False, True):
        try:
            await _scan(records, units, columns=columns)
        except TieredStoreError as exc:
            assert "offset 5" in str(exc), exc
        else:
            raise AssertionError("a unit that disagrees with its record was read")


def test_a_spec_takes_tags_in_a_tags_scan_only() -> None:
    assert ScanSpec.for_tags("t", 0, 0, 1, codec=None, tags=frozenset(), max_count=1,
                             max_bytes=1).tags == frozenset()
    for mode, tags in ((ScanMode.GET, frozenset(["a"])), (ScanMode.TAGS, None)):
        try:
            ScanSpec("t", 0, mode, 0, 1, tags=tags)
        except ValueError as exc:
            assert f"a {mode.value} scan takes tags: {tags}" == str(exc), exc
        else:
            raise AssertionError(f"a {mode.value} scan took tags {tags}")
