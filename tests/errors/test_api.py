"""Rows A, G, T, O, D, P of docs/errors.md: bad arguments of the message store's API.

Each case runs against a store holding flushed messages; after it, every one
of them reads back byte for byte and no object of the bucket changed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import tests.store.test_disk_cache as disk_cache
from tests.errors.helpers import (
    QUEUE,
    SEEDED,
    TOPIC,
    Case,
    Seeded,
    cases_by_id,
    memory_config,
    raises,
)
from tieredstore.config import GiB, KiB, MiB, TieredStoreConfig
from tieredstore.errors import ConfigError, InvalidArgument, InvalidArgumentType, InvalidName
from tieredstore.objectstore import MemoryObjectStore, read_only
from tieredstore.store import MessageStore, MessageTooLarge, OffsetError, OffsetOutOfRange

T, Q = TOPIC, QUEUE
WRONG_TYPE = (InvalidArgumentType, TypeError)


def now_ms() -> int:
    return int(time.time() * 1000)


def append(*args: Any, **kwargs: Any) -> Any:
    return lambda s: s.append(*args, **kwargs)


def released() -> memoryview:
    view = memoryview(b"abc")
    view.release()
    return view


def open_with(config: Any = None, **kwargs: Any) -> Any:
    def run(_: MessageStore) -> None:
        store = MessageStore.open(config if config is not None else memory_config(),
                                  store=kwargs.pop("store", MemoryObjectStore()), **kwargs)
        store.close()
    return run


def open_local(path_of: Any, **overrides: Any) -> Any:
    def run(_: MessageStore) -> None:
        MessageStore.open(TieredStoreConfig(**path_of(), **overrides)).close()
    return run


CASES = cases_by_id(
    # --- append: the body ------------------------------------------------------------------------
    Case("A01", append(T, Q, 5), InvalidArgumentType, r"body: must be bytes-like.*got int 5; "
         r"bytes\(5\) would be 5 zero bytes"),
    Case("A02", append(T, Q, [1, 2, 3]), InvalidArgumentType,
         r"body: must be bytes-like .*got list \[1, 2, 3\]"),
    Case("A03", append(T, Q, "hello"), InvalidArgumentType,
         r"body: .*got str 'hello'; encode text first"),
    Case("A04", append(T, Q, None), InvalidArgumentType, r"body: .*got NoneType None"),
    Case("A05", append(T, Q, {"a": 1}), InvalidArgumentType, r"body: .*got dict"),
    Case("A46", lambda s: s.append(T, Q, released()), InvalidArgument,
         r"body: is a released memoryview"),
    # --- keys ------------------------------------------------------------------------------------
    Case("A06", append(T, Q, b"x", keys="order-1"), InvalidArgumentType,
         r"keys: must be a sequence of str .*not a bare str: got 'order-1'; for one key write "
         r"keys=\['order-1'\]"),
    Case("A07", append(T, Q, b"x", keys=[1]), InvalidArgumentType,
         r"keys\[0\]: must be a str, got int 1"),
    Case("A08", append(T, Q, b"x", keys=None), InvalidArgumentType,
         r"keys: .*got NoneType None; use \(\) for no keys"),
    Case("A09", append(T, Q, b"x", keys={"a", "b"}), InvalidArgumentType, r"keys: .*got set"),
    Case("A10", lambda s: s.append(T, Q, b"x", keys=(k for k in ["a"])), InvalidArgumentType,
         r"keys: .*got generator"),
    Case("A11", append(T, Q, b"x", keys=["ok", "\ud800"]), InvalidArgument,
         r"keys\[1\]: '\\ud800' is not valid Unicode text: .*lone surrogate"),
    Case("A12", append(T, Q, b"x", keys=["k" * 70_000]), InvalidArgument,
         r"keys\[0\]: is 70000 bytes in UTF-8, at most 65534 allowed"),
    Case("A13", append(T, Q, b"x", keys=["k"] * 70_000), InvalidArgument,
         r"keys: 70000 keys, at most 65534 allowed"),
    Case("A49", append(T, Q, b"x", keys=[b"k"]), InvalidArgumentType,
         r"keys\[0\]: must be a str, got bytes b'k'"),
    # --- tags ------------------------------------------------------------------------------------
    Case("A14", append(T, Q, b"x", tags=5), InvalidArgumentType,
         r"tags: must be a str or None, got int 5"),
    Case("A15", append(T, Q, b"x", tags="a\udc80"), InvalidArgument,
         r"tags: 'a\\udc80' is not valid Unicode text: '\\udc80' at index 1"),
    Case("A16", append(T, Q, b"x", tags=b"x"), InvalidArgumentType,
         r"tags: must be a str or None, got bytes"),
    Case("A17", append(T, Q, b"x", tags="t" * 70_000), InvalidArgument,
         r"tags: is 70000 bytes in UTF-8, at most 65534"),
    # --- properties ------------------------------------------------------------------------------
    Case("A18", append(T, Q, b"x", properties=[("a", "b")]), InvalidArgumentType,
         r"properties: must be a mapping of str to str .*got list"),
    Case("A19", append(T, Q, b"x", properties={"a": 1}), InvalidArgumentType,
         r"properties\['a'\]: must be a str, got int 1"),
    Case("A20", append(T, Q, b"x", properties={1: "a"}), InvalidArgumentType,
         r"properties: names must be str, got int 1"),
    Case("A21", append(T, Q, b"x", properties={"\ud800": "a"}), InvalidArgument,
         r"properties name '\\ud800': .*not valid Unicode"),
    Case("A22", append(T, Q, b"x", properties={"a": "\ud800"}), InvalidArgument,
         r"properties\['a'\]: '\\ud800' is not valid Unicode"),
    Case("A47", append(T, Q, b"x", properties={str(i): "" for i in range(70_000)}),
         InvalidArgument, r"properties: 70000 properties, at most 65534"),
    Case("A48", append(T, Q, b"x", properties={"a": None}), InvalidArgumentType,
         r"properties\['a'\]: must be a str, got NoneType"),
    # --- size: max_message_size covers the whole record ------------------------------------------
    Case("A23", append(T, Q, b"x", properties={"p": "v" * (20 * MiB)}), MessageTooLarge,
         r"t/0: message too large: its properties are 20971527 B \(20.0 MiB\); the whole "
         r"record is 20971570 bytes, the limit is 4194304 bytes \(max_message_size = 4 MiB\)"),
    Case("A24", append(T, Q, b"x", keys=["k" * 60_000] * 200), MessageTooLarge,
         r"its keys are 12000400 B \(11.4 MiB\).*limit is 4194304"),
    Case("A25", append(T, Q, b"x" * (4 * MiB + 1)), MessageTooLarge,
         r"its body is 4194305 B \(4.0 MiB\).*the limit is 4194304"),
    Case("A52", append(T, Q, b"x" * (4 * MiB - 20), tags="t" * 30), MessageTooLarge,
         r"its body is .*framing 42 B"),
    # --- timestamps: milliseconds, within the store's window -------------------------------------
    Case("A26", lambda s: s.append(T, Q, b"x", timestamp=int(time.time())), InvalidArgument,
         r"timestamp: \d+ looks like seconds since the epoch .*timestamps are milliseconds"),
    Case("A27", append(T, Q, b"x", timestamp=-1), InvalidArgument,
         r"timestamp: must be in \[0, 9223372036854775807\] of milliseconds .*got -1"),
    Case("A28", append(T, Q, b"x", timestamp=2**63), InvalidArgument,
         r"timestamp: must be in \[0, 9223372036854775807\].*got 9223372036854775808"),
    Case("A29", append(T, Q, b"x", timestamp=1.5), InvalidArgumentType,
         r"timestamp: must be an int of milliseconds since the epoch, got float 1.5"),
    Case("A30", append(T, Q, b"x", timestamp="123"), InvalidArgumentType,
         r"timestamp: must be an int .*got str '123'"),
    Case("A31", append(T, Q, b"x", timestamp=True), InvalidArgumentType,
         r"timestamp: must be an int .*got bool True"),
    Case("A32", lambda s: s.append(T, Q, b"x", timestamp=now_ms() + 86_400_000), InvalidArgument,
         r"timestamp: \d+ \(.*Z\) is 24 h ahead of the store's clock, more than "
         r"timestamp_after_max = 1 h allows"),
    Case("A33", lambda s: s.append(T, Q, b"x", timestamp=now_ms() * 1000), InvalidArgument,
         r"timestamp: \d+ looks like microseconds since the epoch"),
    Case("A34", lambda s: s.append(T, Q, b"x", timestamp=now_ms() - 4 * 86_400_000),
         InvalidArgument, r"timestamp: \d+ \(.*\) is 4 days before the store's clock, more than "
         r"the 3 d the retention time \(file_reserved_time\) allows: retention would delete it"),
    Case("A53", lambda s: s.append(T, Q, b"x", timestamp=1_700_000_000_000), InvalidArgument,
         r"set timestamp_before_max \(inf: no limit\)"),
    # --- offsets ---------------------------------------------------------------------------------
    Case("A35", append(T, Q, b"x", offset="1"), InvalidArgumentType,
         r"offset: must be an int, got str '1'"),
    Case("A36", append(T, Q, b"x", offset=-1), InvalidArgument,
         r"offset: must be in \[0, 99999999999999999999\], got -1"),
    Case("A37", append(T, Q, b"x", offset=99), OffsetError,
         rf"t/0: offset 99 would be a gap: the next offset is {SEEDED}"),
    Case("A38", append(T, Q, b"x", offset=30.0), InvalidArgumentType,
         r"offset: must be an int, got float 30.0; use int\(30.0\)"),
    Case("A50", append(T, Q, b"x", offset=True), InvalidArgumentType,
         r"offset: must be an int, got bool True"),
    Case("A54", append(T, Q, b"x", offset=0), OffsetError, r"offset 0 would be a rewind"),
    # --- topic and queue_id ----------------------------------------------------------------------
    Case("A39", append("a/b", Q, b"x"), InvalidName, r"invalid topic 'a/b': must not contain '/'"),
    Case("A40", append(5, Q, b"x"), InvalidName, r"invalid topic '5': must be a string, got int"),
    Case("A41", append(T, -1, b"x"), InvalidName, r"invalid queue_id '-1': must be in \[0, "),
    Case("A42", append(T, "0", b"x"), InvalidName,
         r"invalid queue_id '0': must be an int, got str"),
    Case("A43", append(T, True, b"x"), InvalidName, r"invalid queue_id 'True': .*got bool"),
    Case("A44", append("..", Q, b"x"), InvalidName, r"invalid topic '..': must not be '.' or '..'"),
    Case("A45", append(["t"], Q, b"x"), InvalidName, r"invalid topic .*must be a string, got list"),
    Case("A55", append("new-topic", Q, 5), InvalidArgumentType, r"body: must be bytes-like"),
    # --- get -------------------------------------------------------------------------------------
    Case("G01", lambda s: s.get(T, Q, "0"), InvalidArgumentType,
         r"offset: must be an int, got str"),
    Case("G02", lambda s: s.get(T, Q, 1.5), InvalidArgumentType,
         r"offset: must be an int, got float 1.5"),
    Case("G03", lambda s: s.get(T, Q, -1), InvalidArgument, r"offset: must be in \[0, .*got -1"),
    Case("G04", lambda s: s.get(T, Q, 99), OffsetOutOfRange,
         rf"t/0: offset 99 is outside the queue.s offsets \[0, {SEEDED}\)"),
    Case("G05", lambda s: s.get(T, Q, 0, max_count=0), InvalidArgument,
         r"max_count: must be in \[1, .*got 0"),
    Case("G06", lambda s: s.get(T, Q, 0, max_count=-1), InvalidArgument,
         r"max_count: must be in \[1, .*got -1"),
    Case("G07", lambda s: s.get(T, Q, 0, max_count=1.5), InvalidArgumentType,
         r"max_count: must be an int, got float 1.5"),
    Case("G08", lambda s: s.get(T, Q, 0, max_bytes=0), InvalidArgument,
         r"max_bytes: must be in \[1, .*got 0"),
    Case("G09", lambda s: s.get(T, Q, 0, max_bytes="1"), InvalidArgumentType,
         r"max_bytes: must be an int, got str '1'"),
    Case("G10", lambda s: s.get("nope", Q, 0), OffsetOutOfRange, r"nope/0: no such queue"),
    # --- offset_for_time, offsets, delete_expired ------------------------------------------------
    Case("T01", lambda s: s.offset_for_time(T, Q, "x"), InvalidArgumentType,
         r"timestamp_ms: must be an int of milliseconds .*got str 'x'"),
    Case("T02", lambda s: s.offset_for_time(T, Q, -1), InvalidArgument,
         r"timestamp_ms: must be in \[0, 9223372036854775807\].*got -1"),
    Case("T03", lambda s: s.offset_for_time(T, Q, 2**64), InvalidArgument,
         r"timestamp_ms: must be in \[0, .*got 18446744073709551616"),
    Case("T04", lambda s: s.offset_for_time(T, Q, 1.5), InvalidArgumentType,
         r"timestamp_ms: must be an int .*got float 1.5"),
    Case("O01", lambda s: s.max_offset(None, Q), InvalidName,
         r"invalid topic 'None': must be a string, got NoneType"),
    Case("O02", lambda s: s.min_offset(T, 1.0), InvalidName,
         r"invalid queue_id '1.0': must be an int, got float"),
    Case("O03", lambda s: s.commit_offset(T, 2**70), InvalidName,
         r"invalid queue_id '1180591620717411303424': must be in \[0, "),
    Case("D01", lambda s: s.delete_expired(now=time.time() * 1000), InvalidArgument,
         r"now: [\d.]+ looks like milliseconds; now is seconds since the epoch"),
    Case("D02", lambda s: s.delete_expired(now="x"), InvalidArgumentType,
         r"now: must be a number of seconds since the epoch or None, got str 'x'"),
    Case("D03", lambda s: s.delete_expired(now=float("nan")), InvalidArgument,
         r"now: must be a finite number of seconds .*got nan"),
    # --- open ------------------------------------------------------------------------------------
    Case("P01", lambda s: MessageStore.open({"backend": "memory"}),  # type: ignore[arg-type]
         InvalidArgumentType, r"config: must be a TieredStoreConfig or None, got dict; build "
         r"one with load_config"),
    Case("P02", open_with(topic_reserved_time={"t": -5}), InvalidArgument,
         r"topic_reserved_time\['t'\]: must be a finite number of seconds, at least 0, got -5"),
    Case("P03", open_with(store="bucket"), InvalidArgumentType,
         r"store: must be an ObjectStore or None, got str"),
    Case("P04", open_with(writer_id=5), InvalidArgumentType, r"writer_id: must be a str, got int"),
    Case("P11", open_with(store=read_only(MemoryObjectStore())), InvalidArgument,
         r"store: is open for reading only; a writing store needs one that writes"),
    Case("P05", lambda s: MessageStore.open(TieredStoreConfig(local_path=__file__)), ConfigError,
         r"config 'local_path': '.*test_api.py' exists and is not a directory"),
    Case("P06", lambda s: MessageStore.open(TieredStoreConfig(
        backend="memory", disk_cache_bytes=MiB, disk_cache_path=f"{__file__}/cache")),
        ConfigError, r"config 'disk_cache_path': the disk cache directory '.*test_api.py/cache' "
                     r"cannot be created: '.*test_api.py' is not a directory"),
    Case("P07", lambda s: MessageStore.open(TieredStoreConfig(cluster="..")), ConfigError,
         r"config 'cluster': invalid cluster '..': must not be '.' or '..'"),
    Case("P08", lambda s: MessageStore.open(TieredStoreConfig(commit_log_max_size=64 * KiB)),
         ConfigError, r"config 'max_message_size': 4 MiB cannot fit a commit-log segment "
                      r"\(commit_log_max_size = 64 KiB\)"),
    Case("P10", lambda s: MessageStore.open(TieredStoreConfig(chunk_size=5 * GiB)),
         ConfigError, r"config 'chunk_size': 5 GiB is too large for write_mode = 'log': a log "
                      r"piece's length is 32 bits, so chunk_size must not exceed 4194303 KiB"),
)


@pytest.fixture
def seeded() -> Iterator[Seeded]:
    store = Seeded.open()
    yield store
    store.close_and_check_durable()


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_a_bad_argument_gets_a_clear_error_and_changes_nothing(seeded: Seeded,
                                                                case_id: str) -> None:
    case = CASES[case_id]
    error = raises(case, seeded.store)
    assert isinstance(error, TypeError | ValueError), type(error).__mro__
    seeded.assert_intact()


def test_a_timestamp_in_seconds_never_reaches_retention(seeded: Seeded) -> None:
    """The issue's case: ``timestamp=int(time.time())`` was stored as 1970, and the
    next ``delete_expired()`` deleted 96 of 100 fresh messages. Now it is refused,
    and retention deletes none of them."""
    with pytest.raises(InvalidArgument, match="looks like seconds"):
        seeded.store.append(T, Q, b"x", timestamp=int(time.time()))
    assert seeded.store.delete_expired() == 0
    seeded.assert_intact()


def test_the_window_follows_the_topics_retention_and_the_knobs() -> None:
    day = 86_400_000
    with MessageStore.open(memory_config(), store=MemoryObjectStore(),
                           topic_reserved_time={"long": 30 * 86_400}) as store:
        assert store.append("long", 0, b"x", timestamp=now_ms() - 20 * day) == 0
        with pytest.raises(InvalidArgument, match=r"topic_reserved_time\['long'\]"):
            store.append("long", 0, b"x", timestamp=now_ms() - 40 * day)
        assert store.append("t", 0, b"x", timestamp=now_ms() + 30 * 60_000) == 0  # 30 min ahead
    history = memory_config(timestamp_before_max=float("inf"), timestamp_after_max=float("inf"))
    with MessageStore.open(history, store=MemoryObjectStore()) as store:
        for ts in (0, 1_700_000_000_000, now_ms() + 365 * day, 2**63 - 1):
            offset = store.append("t", 0, b"x", timestamp=ts)
            assert store.get("t", 0, offset)[0].store_timestamp == ts
    narrow = memory_config(timestamp_before_max=60.0)
    with MessageStore.open(narrow, store=MemoryObjectStore()) as store, \
            pytest.raises(InvalidArgument, match="more than the 1 min timestamp_before_max"):
        store.append("t", 0, b"x", timestamp=now_ms() - 120_000)


def test_bytes_like_bodies_and_sequences_of_keys_round_trip() -> None:
    import array

    with MessageStore.open(memory_config(), store=MemoryObjectStore()) as store:
        ints = array.array("i", [1, 2, 3])
        for body, want in ((bytearray(b"ba"), b"ba"), (memoryview(b"abcdef")[1:4], b"bcd"),
                           (memoryview(ints), ints.tobytes()), (b"", b"")):
            offset = store.append("t", 0, body,  # type: ignore[arg-type]
                                  keys=["a", ""], tags="", properties={"": ""})
            got = store.get("t", 0, offset)[0]
            assert (got.body, got.keys, got.tags, dict(got.properties)) == \
                (want, ("a", ""), "", {"": ""})


CASES_WITHOUT_ERROR = {
    "A51": test_a_timestamp_in_seconds_never_reaches_retention,
    "P09": disk_cache.test_a_full_cache_disk_opens_writer_and_reader_without_the_disk_tier,
}


async def test_a_refused_first_append_creates_no_queue() -> None:
    from tests.store.conftest import small_config
    from tieredstore.objectstore import MemoryObjectStore
    from tieredstore.store import AsyncMessageStore

    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(small_config(), store=backend)
    opened = await backend.list_all("")  # the store's entry among the broker's writers
    with pytest.raises(OffsetError, match="offset 5 would be a gap"):
        await store.append("fresh", 0, b"x", offset=5)
    assert store.queues() == []
    assert await backend.list_all("") == opened  # nothing written
    assert await store.append("fresh", 0, b"x", offset=0) == 0
    await store.close()
