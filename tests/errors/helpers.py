"""What every test of docs/errors.md shares: a store holding flushed messages,
and the check that a bad input changed nothing.

Each test module lists its rows in ``CASES`` (id -> what the row tries);
``test_table.py`` keeps those ids and the rows of ``docs/errors.md`` equal.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import Message, MessageStore

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
SEEDED = 30
TOPIC, QUEUE = "t", 0


@dataclass(frozen=True)
class Case:
    """One row of docs/errors.md: an input, the error it gets, words its message has."""

    id: str
    call: Callable[..., Any]
    error: type[BaseException] | tuple[type[BaseException], ...]
    match: str


def cases_by_id(*cases: Case) -> dict[str, Case]:
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), f"duplicate ids: {ids}"
    return {c.id: c for c in cases}


def raises(case: Case, *args: Any) -> BaseException:
    """Run the case; it must raise its error, with a message matching its words."""
    with pytest.raises(case.error) as info:
        case.call(*args)
    text = str(info.value)
    assert re.search(case.match, text), f"{case.id}: {text!r} does not match {case.match!r}"
    assert "\n" not in text, f"{case.id}: a message of more than one line: {text!r}"
    return info.value


def memory_config(**overrides: Any) -> TieredStoreConfig:
    return load_config(env={}, backend="memory", group_commit_interval=0.01, gc_interval=0,
                       **overrides)


def oracle_messages(n: int = SEEDED, seed: int = 12) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        out.append({
            "body": rng.randbytes(rng.randint(0, 300)),
            "keys": tuple(f"key-{i}-{k}" for k in range(i % 3)),
            "tags": None if i % 4 == 0 else f"tag{i % 5}",
            "properties": {"n": str(i)} if i % 2 else {},
            "timestamp": now - (n - i) * 1000 if i % 3 == 0 else None,
        })
    return out


@dataclass
class Seeded:
    """A message store whose ``t/0`` holds :data:`SEEDED` flushed messages."""

    bucket: ObjectStore
    store: MessageStore
    written: list[Message] = field(default_factory=list)
    listing: list[tuple[str, int, str]] = field(default_factory=list)

    @classmethod
    def open(cls, config: TieredStoreConfig | None = None) -> Seeded:
        bucket = MemoryObjectStore()
        store = MessageStore.open(config or memory_config(), store=bucket)
        for m in oracle_messages():
            store.append(TOPIC, QUEUE, m["body"], keys=m["keys"], tags=m["tags"],
                         properties=m["properties"], timestamp=m["timestamp"])
        store.flush()
        seeded = cls(bucket, store)
        seeded.written = store.get(TOPIC, QUEUE, 0, max_count=1000)
        assert [m.body for m in seeded.written] == [m["body"] for m in oracle_messages()]
        seeded.listing = seeded.objects()
        return seeded

    def objects(self) -> list[tuple[str, int, str]]:
        infos = self.store._loop.run(self.bucket.list_all(""))
        return sorted((i.key, i.size, i.etag) for i in infos)

    def assert_intact(self) -> None:
        """Every flushed message reads back byte for byte, nothing was added, and
        not one object of the bucket changed."""
        assert self.store.queues() == [(TOPIC, QUEUE)]
        assert self.store.max_offset(TOPIC, QUEUE) == SEEDED
        assert self.store.get(TOPIC, QUEUE, 0, max_count=1000) == self.written
        assert self.objects() == self.listing

    def close_and_check_durable(self) -> None:
        self.store.close()
        with MessageStore.open(memory_config(), store=self.bucket) as again:
            assert again.get(TOPIC, QUEUE, 0, max_count=1000) == self.written


def seed_local(path: Path) -> list[Message]:
    """A local-directory store at ``path`` holding flushed messages; what it holds."""
    config = load_config(env={}, backend="local", local_path=str(path), local_fsync=False,
                         group_commit_interval=0.01, gc_interval=0)
    with MessageStore.open(config) as store:
        for m in oracle_messages(10):
            store.append(TOPIC, QUEUE, m["body"], keys=m["keys"], tags=m["tags"],
                         properties=m["properties"], timestamp=m["timestamp"])
        store.flush()
        return store.get(TOPIC, QUEUE, 0, max_count=100)


def read_local(path: Path) -> list[Message]:
    config = load_config(env={}, backend="local", local_path=str(path), local_fsync=False,
                         gc_interval=0)
    with MessageStore.open(config) as store:
        return store.get(TOPIC, QUEUE, 0, max_count=100)
