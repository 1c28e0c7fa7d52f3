"""Random arguments, of random types and values, thrown at ``append``, ``get``,
``offset_for_time`` and ``load_config``.

Every call either succeeds, with an exact round trip, or raises a
TieredStoreError, TypeError or ValueError with a message; the data stored
before never changes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.errors.helpers import memory_config
from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import TieredStoreError
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.store import Message, MessageStore

ERRORS = (TieredStoreError, TypeError, ValueError)
SECRET = "fuzz-secret-value-0123456789"
NOW = int(time.time() * 1000)

any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12)
weird = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                  any_text, st.binary(max_size=8), st.lists(st.integers(), max_size=3),
                  st.dictionaries(any_text, st.integers(), max_size=2))


def as_view(data: bytes) -> memoryview:
    return memoryview(data)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any],
           one_in: int = 8) -> st.SearchStrategy[Any]:
    """``good`` but one time in ``one_in``, so that whole calls often succeed."""
    return st.integers(1, one_in).flatmap(lambda n: bad if n == 1 else good)


names = st.text(alphabet="abcdefghij-_.0", min_size=1, max_size=6).filter(
    lambda t: t not in (".", ".."))
topics = mostly(st.one_of(st.sampled_from(["t", "u"]), names), st.one_of(weird, any_text))
queue_ids = mostly(st.integers(0, 2), st.one_of(st.integers(), weird))
bodies = mostly(st.one_of(st.binary(max_size=64), st.binary(max_size=64).map(bytearray),
                          st.binary(max_size=64).map(as_view)), weird)
keys = mostly(st.one_of(st.lists(any_text, max_size=4), st.lists(any_text, max_size=4).map(tuple)),
              st.one_of(any_text, st.frozensets(any_text, max_size=2),
                        st.lists(weird, max_size=2), weird))
tags = mostly(st.one_of(st.none(), any_text), weird)
properties = mostly(st.one_of(st.none(), st.dictionaries(any_text, any_text, max_size=3)),
                    st.one_of(st.dictionaries(st.one_of(st.integers(), st.binary(max_size=3),
                                                        any_text), weird, max_size=2), weird))
timestamps = mostly(st.one_of(st.none(), st.integers(NOW - 3_600_000, NOW + 600_000)),
                    st.one_of(st.integers(-2**64, 2**64),
                              st.integers(NOW // 1000 - 10, NOW // 1000), weird))
offsets = mostly(st.none(), st.one_of(st.integers(-3, 40), weird))


def expected_body(body: Any) -> bytes:
    return bytes(body)


class Fuzzed:
    """A store and an oracle of every message it accepted."""

    def __init__(self) -> None:
        self.store = MessageStore.open(memory_config(), store=MemoryObjectStore())
        self.accepted: dict[tuple[str, int], list[Message]] = {}
        for i in range(5):
            self.append_ok("t", 0, b"seed-%d" % i)
        self.store.flush()

    def append_ok(self, topic: str, queue_id: int, body: bytes) -> None:
        offset = self.store.append(topic, queue_id, body)
        self.accepted.setdefault((topic, queue_id), []).append(
            self.store.get(topic, queue_id, offset)[0])

    def check(self) -> None:
        """Every accepted message reads back as it was, and nothing else is stored.

        A queue may exist without messages: an append with an explicit ``offset``
        to a queue not yet created opens it (its first head written) before the
        queue refuses the offset (see docs/errors.md, *Left open*)."""
        for extra in set(self.store.queues()) - set(self.accepted):
            assert self.store.max_offset(*extra) == 0, extra
        for (topic, queue_id), messages in self.accepted.items():
            assert self.store.max_offset(topic, queue_id) == len(messages)
            assert self.store.get(topic, queue_id, 0, max_count=10_000) == messages


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Fuzzed]:
    state = Fuzzed()
    yield state
    state.store.flush()
    state.check()
    state.store.close()


def explained(exc: BaseException) -> None:
    assert isinstance(exc, ERRORS), f"{type(exc).__name__}: {exc}"
    assert str(exc).strip(), f"{type(exc).__name__} without a message"


FUZZ = settings(max_examples=400, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(args=st.fixed_dictionaries({
    "topic": topics, "queue_id": queue_ids, "body": bodies, "keys": keys, "tags": tags,
    "properties": properties, "timestamp": timestamps, "offset": offsets}))
def test_append_round_trips_or_refuses(fuzzed: Fuzzed, args: dict[str, Any]) -> None:
    topic, queue_id, body = args.pop("topic"), args.pop("queue_id"), args.pop("body")
    keys, tags, properties = args["keys"], args["tags"], args["properties"]
    timestamp = args["timestamp"]
    try:
        got = fuzzed.store.append(topic, queue_id, body, **args)
    except Exception as exc:
        explained(exc)
        event(f"append refused: {type(exc).__name__}")
        fuzzed.check()
        return
    event("append stored")
    message = fuzzed.store.get(topic, queue_id, got)[0]
    assert message.offset == got
    assert message.body == expected_body(body)
    assert message.keys == tuple(keys)
    assert message.tags == tags
    assert dict(message.properties) == dict(properties or {})
    if timestamp is not None:
        assert message.store_timestamp == timestamp
    fuzzed.accepted.setdefault((topic, queue_id), []).append(message)
    fuzzed.check()


@FUZZ
@given(args=st.fixed_dictionaries({
    "topic": topics, "queue_id": queue_ids,
    "offset": mostly(st.integers(0, 8), st.one_of(st.integers(-3, 2**70), weird)),
    "max_count": mostly(st.integers(1, 8), st.one_of(st.integers(-2, 0), weird)),
    "max_bytes": mostly(st.integers(1, 10_000), st.one_of(st.integers(-2, 0), weird))}))
def test_get_reads_exactly_or_refuses(fuzzed: Fuzzed, args: dict[str, Any]) -> None:
    topic, queue_id, offset = args["topic"], args["queue_id"], args["offset"]
    max_count, max_bytes = args["max_count"], args["max_bytes"]
    try:
        got = fuzzed.store.get(topic, queue_id, offset, max_count, max_bytes)
    except Exception as exc:
        explained(exc)
        event(f"get refused: {type(exc).__name__}")
        return
    event("get read")
    stored = fuzzed.accepted[(topic, queue_id)]
    assert max_count >= 1 and max_bytes >= 1
    assert got == stored[offset:offset + len(got)]
    assert len(got) <= max_count
    if offset < len(stored):
        assert got, "at least one message when there is one"
    fuzzed.check()


@FUZZ
@given(topic=topics, queue_id=queue_ids,
       timestamp=mostly(st.integers(NOW - 3_600_000, NOW + 600_000),
                        st.one_of(st.integers(-5, 2**64), weird)))
def test_offset_for_time_answers_in_range_or_refuses(fuzzed: Fuzzed, topic: Any, queue_id: Any,
                                                     timestamp: Any) -> None:
    try:
        got = fuzzed.store.offset_for_time(topic, queue_id, timestamp)
    except Exception as exc:
        explained(exc)
        event(f"offset_for_time refused: {type(exc).__name__}")
        return
    event("offset_for_time answered")
    stored = fuzzed.accepted[(topic, queue_id)]
    assert 0 <= got <= len(stored)  # the fuzzed timestamps are not in order: no more to say
    fuzzed.check()


KEYS = [f.name for f in __import__("dataclasses").fields(TieredStoreConfig)]
config_keys = st.one_of(st.sampled_from(KEYS), any_text)
config_values = st.one_of(weird, st.sampled_from(["1", "0", "true", "4MiB", "inf", "nan", "-1",
                                                  "1e400", "..", "/abs", "", "local", "s3"]),
                          st.integers(0, 2**40), st.floats(0, 1e6))


@FUZZ
@given(overrides=st.dictionaries(config_keys, config_values, max_size=4),
       env=st.dictionaries(st.one_of(config_keys.map(lambda k: f"TIEREDSTORE_{k.upper()}"),
                                     any_text), any_text, max_size=3),
       toml=st.one_of(st.none(), any_text.map(str.encode), st.binary(max_size=40),
                      st.dictionaries(config_keys, config_values, max_size=3).map(
                          lambda d: "".join(f"{k} = {_toml(v)}\n" for k, v in d.items())
                          .encode(errors="surrogatepass"))))
def test_load_config_builds_a_valid_config_or_names_the_problem(
        tmp_path_factory: pytest.TempPathFactory, overrides: dict[str, Any],
        env: dict[str, str], toml: bytes | None) -> None:
    assume(all(isinstance(k, str) for k in overrides))
    overrides = {k: v for k, v in overrides.items() if k.isidentifier()}
    overrides["s3_secret_access_key"] = SECRET
    path: Path | None = None
    if toml is not None:
        path = tmp_path_factory.mktemp("conf") / "fuzz.toml"
        path.write_bytes(toml)
    try:
        config = load_config(path, env=env, **overrides)
    except Exception as exc:
        explained(exc)
        event(f"load_config refused: {type(exc).__name__}")
        assert SECRET not in str(exc)
        return
    event("load_config built a config")
    assert isinstance(config, TieredStoreConfig)
    assert SECRET not in repr(config) and SECRET not in str(config)
    assert config == TieredStoreConfig(**{f: getattr(config, f) for f in KEYS})


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if math.isinf(value) else repr(value))
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
