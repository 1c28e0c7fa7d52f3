"""Reading around damage (issue 39, defect 9): ``get_around_damage`` returns every
message a flipped byte did not make unreadable and reports exactly the offsets
it did, with a reason; ``get`` stays strict and raises at each of them.

Each case flips one byte in the bucket of a store written in either write mode
(helpers of ``tests/corpus/damage.py``); which offsets it makes unreadable is
worked out from what was appended (records lie back to back) and from object
names alone, not from the code under test.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.corpus.damage import TOPIC, flip, keys_of, rewrite
from tests.spark.conftest import BuiltStore, build_store
from tieredstore.errors import ServerError, TieredStoreError
from tieredstore.objectstore import LocalObjectStore, ObjectStore
from tieredstore.store import (
    AroundDamage,
    AsyncMessageStore,
    Message,
    MessageStore,
    ReadOnlyMessageStore,
)
from tieredstore.store.formats.record import encode_record
from tieredstore.testing import ForwardingObjectStore

T = TypeVar("T")
PER_QUEUE = 220
BATCH = 16
Reader = AsyncMessageStore | ReadOnlyMessageStore


def positions(built: BuiltStore) -> list[tuple[int, int]]:
    """Each offset's commit-log record as flat ``[start, end)`` (back to back)."""
    out, at = [], 0
    for w in built.messages[(TOPIC, 0)]:
        size = len(encode_record(w.offset, w.timestamp, w.body, keys=w.keys, tags=w.tags,
                                 properties=w.properties))
        out.append((at, at + size))
        at += size
    return out


def records_in(built: BuiltStore, start: int, end: int) -> set[int]:
    """The offsets whose records overlap flat commit-log bytes ``[start, end)``."""
    return {o for o, (a, b) in enumerate(positions(built)) if a < end and b > start}


def flat(key: str) -> tuple[int, int]:
    """A chunk key's segment base and position in the segment."""
    found = re.search(r"/seg-(\d{20})/chunk-(\d{20})", key)
    assert found is not None, key
    return int(found[1]), int(found[2])


def base_of(key: str) -> int:
    found = re.search(r"/seg-(\d{20})/", key)
    assert found is not None, key
    return int(found[1])


async def sizes(store: ObjectStore) -> dict[str, int]:
    return {o.key: o.size for o in await store.list_all("")}


# --- the damage, and the offsets it makes unreadable ----------------------------------

Damage = Callable[[ObjectStore, BuiltStore], Awaitable[set[int]]]


async def one_record(store: ObjectStore, built: BuiltStore) -> set[int]:
    """A record's byte flipped, its chunk's CRC made to match: only the record's
    own CRC tells; that one offset."""
    key = (await keys_of(store, "commitlog", chunks=True))[1]
    base, position = flat(key)
    await rewrite(store, key, flip(100), fix_crc=True)
    return records_in(built, base + position + 100, base + position + 101)


async def chunk_byte(store: ObjectStore, built: BuiltStore) -> set[int]:
    """A chunk's byte flipped (its CRC kept): every record in the chunk."""
    key = (await keys_of(store, "commitlog", chunks=True))[1]
    base, position = flat(key)
    await rewrite(store, key, flip(100), fix_crc=False)
    return records_in(built, base + position, base + position + (await sizes(store))[key])


async def merged_table(store: ObjectStore, built: BuiltStore) -> set[int]:
    """A byte of a merged commit-log segment's unit table flipped: the segment
    cannot be opened; every record in it."""
    merged = await keys_of(store, "commitlog", chunks=False)
    key = merged[0]
    await rewrite(store, key, flip((await sizes(store))[key] - 40), fix_crc=False)
    return records_in(built, base_of(key), base_of(merged[1]))


async def merged_consume_queue(store: ObjectStore, built: BuiltStore) -> set[int]:
    """A byte of a merged consume-queue segment's units flipped: they are rebuilt
    from the commit log; nothing is lost."""
    key = (await keys_of(store, "consumequeue", chunks=False))[1]
    await rewrite(store, key, flip(100), fix_crc=False)
    return set()


async def consume_queue_table(store: ObjectStore, built: BuiltStore) -> set[int]:
    """A byte of a merged consume-queue segment's unit table flipped: the segment
    cannot be opened, its units are rebuilt from the commit log; nothing is lost."""
    key = (await keys_of(store, "consumequeue", chunks=False))[1]
    await rewrite(store, key, flip((await sizes(store))[key] - 40), fix_crc=False)
    return set()


async def unit_and_record(store: ObjectStore, built: BuiltStore) -> set[int]:
    """A consume-queue chunk's byte flipped and one record its units point to: the
    units are rebuilt up to that record; past it no unit says where the next
    record starts, so the rest of the chunk's offsets are lost."""
    cq_key = (await keys_of(store, "consumequeue", chunks=True))[0]
    base, position = flat(cq_key)
    first = (base + position) // 32
    end = first + (await sizes(store))[cq_key] // 32
    await rewrite(store, cq_key, flip(40), fix_crc=False)
    bad = first + 5
    start, _ = positions(built)[bad]
    for key in await keys_of(store, "commitlog", chunks=True):
        seg, at = flat(key)
        if seg + at <= start < seg + at + (await sizes(store))[key]:
            await rewrite(store, key, flip(start - seg - at + 20), fix_crc=True)
            return set(range(bad, end))
    raise AssertionError(f"no commit-log chunk holds byte {start}")


@dataclass(frozen=True)
class Case:
    damage: Damage
    merged: bool


CASES = {
    "one record": Case(one_record, merged=False),
    "chunk byte": Case(chunk_byte, merged=False),
    "merged table": Case(merged_table, merged=True),
    "merged consume queue": Case(merged_consume_queue, merged=True),
    "consume-queue table": Case(consume_queue_table, merged=True),
    "unit and record": Case(unit_and_record, merged=False),
}


def damaged_store(tmp_path: Path, mode: str, case: Case) -> tuple[BuiltStore, set[int]]:
    built = build_store(tmp_path, queues=((TOPIC, 0),), per_queue=PER_QUEUE,
                        merge_on_seal=case.merged, write_mode=mode, gc_interval=0)

    async def damage() -> set[int]:
        store = LocalObjectStore(built.path, fsync=False)
        try:
            return await case.damage(store, built)
        finally:
            await store.close()

    return built, asyncio.run(damage())


# --- reading -------------------------------------------------------------------------


async def read_strictly(reader: Reader) -> tuple[dict[int, Message], set[int]]:
    """The whole queue by ``get``, stepping one offset on past each error: the
    messages read, and the offsets where ``get`` raised."""
    got: dict[int, Message] = {}
    raised: set[int] = set()
    offset = 0
    while offset < PER_QUEUE:
        try:
            batch = await reader.get(TOPIC, 0, offset, BATCH)
        except TieredStoreError:
            raised.add(offset)
            offset += 1
            continue
        assert batch, f"no message and no error at {offset}"
        got.update((m.offset, m) for m in batch)
        offset = batch[-1].offset + 1
    return got, raised


async def read_around(reader: Reader) -> tuple[dict[int, Message], set[int]]:
    """The whole queue by ``get_around_damage``: the messages, the offsets skipped."""
    got: dict[int, Message] = {}
    skipped: set[int] = set()
    offset = 0
    while offset < PER_QUEUE:
        answer = await reader.get_around_damage(TOPIC, 0, offset, BATCH)
        assert isinstance(answer, AroundDamage)
        assert answer.next_offset > offset, f"no progress at {offset}: {answer}"
        covered = {m.offset for m in answer.messages}
        for step in answer.skipped:
            span = set(range(step.first_offset, step.end_offset))
            assert step.reason and not span & covered and not span & skipped, step
            skipped |= span
            covered |= span
        assert covered == set(range(offset, answer.next_offset)), \
            f"offsets [{offset}, {answer.next_offset}) neither read nor reported: {answer}"
        got.update((m.offset, m) for m in answer.messages)
        offset = answer.next_offset
    return got, skipped


def check(built: BuiltStore, got: dict[int, Message], lost: set[int], what: str) -> None:
    written = {w.offset: w for w in built.messages[(TOPIC, 0)]}
    assert sorted(got) == sorted(set(written) - lost), f"{what}: read {len(got)} messages"
    for offset, m in got.items():  # never wrong bytes
        w = written[offset]
        assert (m.body, m.store_timestamp, m.keys, m.tags, dict(m.properties)) == (
            w.body, w.timestamp, w.keys, w.tags, w.properties), f"{what}: offset {offset}"


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("mode", ["log", "direct"])
async def test_reading_around_a_flipped_byte_skips_exactly_what_it_damaged(
        tmp_path: Path, mode: str, name: str) -> None:
    built, lost = await asyncio.to_thread(damaged_store, tmp_path, mode, CASES[name])
    if name not in ("merged consume queue", "consume-queue table"):
        assert lost, "the damage reaches no record"
    readers: list[tuple[str, Callable[[], Awaitable[Reader]]]] = [
        ("read-only", lambda: AsyncMessageStore.open_read_only(built.config)),
        ("store", lambda: AsyncMessageStore.open(built.config)),
    ]
    for what, opening in readers:
        reader = await opening()
        try:
            got, raised = await read_strictly(reader)
            check(built, got, lost, f"{what}, strict")
            assert raised == lost, f"{what}: strict get raised at {sorted(raised)}"
            got, skipped = await read_around(reader)
            check(built, got, lost, f"{what}, around")
            assert skipped == lost, f"{what}: skipped {sorted(skipped)}, lost {sorted(lost)}"
        finally:
            await reader.close()


def test_the_sync_store_reads_around_damage_and_names_the_segment(tmp_path: Path) -> None:
    built, lost = damaged_store(tmp_path, "direct", CASES["chunk byte"])
    with MessageStore.open(built.config) as store:
        with pytest.raises(TieredStoreError, match="CRC32C"):
            store.get(TOPIC, 0, min(lost), BATCH)
        answer = store.get_around_damage(TOPIC, 0, min(lost), BATCH)
    assert [(s.first_offset, s.end_offset) for s in answer.skipped] == [
        (min(lost), max(lost) + 1)]
    step = answer.skipped[0]
    assert "/commitlog" in step.segment and "CRC32C" in step.reason, step
    assert str(step).startswith(f"offsets [{min(lost)}, {max(lost) + 1}): ")
    assert [m.offset for m in answer.messages] == list(range(max(lost) + 1,
                                                             min(lost) + BATCH))


class FailingGets(ForwardingObjectStore):
    """Every GET of a commit-log object fails as an outage would."""

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        if op == "get" and "/commitlog/" in key:
            raise ServerError("injected outage", op=op, key=key)
        return await call()


async def test_an_outage_is_raised_never_skipped(tmp_path: Path) -> None:
    built, _ = await asyncio.to_thread(damaged_store, tmp_path, "direct",
                                       CASES["merged consume queue"])
    backend = LocalObjectStore(built.path, fsync=False)
    config: Any = built.config
    async with await AsyncMessageStore.open_read_only(
            config, store=FailingGets(backend, close_inner=True)) as reader:
        with pytest.raises(ServerError, match="injected outage"):
            await reader.get_around_damage(TOPIC, 0, 0, BATCH)
