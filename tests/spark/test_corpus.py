"""On every damaged store of the corpus, ``tieredstore verify`` and the Spark
verify job name the same damaged offsets, and the store's own reads fail at
exactly those offsets (and return every other message). ``inspect``, Spark's
``stats`` and ``verify`` count the same segments, on the intact store and on
every damaged one."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from tests.corpus.damage import CASES, TOPIC, Case, build_case
from tests.spark.conftest import BuiltStore
from tieredstore.cli.store.inspector import queue_rows
from tieredstore.errors import TieredStoreError
from tieredstore.objectstore import LocalObjectStore
from tieredstore.spark import jobs
from tieredstore.store import AsyncMessageStore, verify_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

OFFSETS = re.compile(r"offset (\d+)()|offsets \[(\d+), (\d+)\)")


def offsets_named(problems: list[str]) -> set[int]:
    """Every offset the problems name (``offset N`` or ``offsets [A, B)``)."""
    out: set[int] = set()
    for text in problems:
        found = OFFSETS.search(text)
        assert found, f"a problem names no offset: {text}"
        if found.group(1) is not None:
            out.add(int(found.group(1)))
        else:
            out.update(range(int(found.group(3)), int(found.group(4))))
    return out


def cli_problems(built: BuiltStore) -> dict[int, list[str]]:
    async def run() -> dict[int, list[str]]:
        store = LocalObjectStore(built.path, fsync=False)
        try:
            report = await verify_store(store, built.config, topic=TOPIC)
        finally:
            await store.close()
        return {c.queue_id: [e.split(": ", 1)[1] for e in c.errors] for c in report.queues}

    return asyncio.run(run())


def inspected_segments(built: BuiltStore) -> dict[int, int]:
    """The segments ``tieredstore inspect`` counts per queue of the topic."""

    async def run() -> dict[int, int]:
        store = LocalObjectStore(built.path, fsync=False)
        try:
            rows = await queue_rows(store, built.config, [(TOPIC, 0), (TOPIC, 1)])
        finally:
            await store.close()
        return {r["queue"]: r["segments"] for r in rows}

    return asyncio.run(run())


def store_unreadable(built: BuiltStore, queue_id: int) -> set[int]:
    """The offsets ``get`` cannot return; every other message must read back."""

    async def run() -> set[int]:
        store = await AsyncMessageStore.open_read_only(built.config)
        bad: set[int] = set()
        try:
            offset, end = 0, await store.max_offset(TOPIC, queue_id)
            while offset < end:
                try:
                    got = await store.get(TOPIC, queue_id, offset, max_count=64)
                except TieredStoreError:
                    bad.add(offset)
                    offset += 1
                    continue
                for m in got:
                    assert m.body == built.messages[(TOPIC, queue_id)][m.offset].body
                offset = got[-1].offset + 1
        finally:
            await store.close()
        return bad

    return asyncio.run(run())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_checker_names_the_same_offsets(case: Case, spark: Any, tmp_path: Path) -> None:
    built = build_case(case, tmp_path / "store")
    cli = cli_problems(built)
    reports = jobs.verify_reports(spark, built.options, jobs.Filters(topics=(TOPIC,)))
    spark_rows = {c.queue_id: list(c.errors) for c in reports.queues}
    stats = jobs.stats(spark, built.options, jobs.Filters(topics=(TOPIC,))).collect()
    segments = inspected_segments(built)
    assert segments == {r.queue_id: r.segments for r in stats} \
        == {c.queue_id: c.segments for c in reports.queues}, (segments, stats, reports)
    assert min(segments.values()) > 2
    assert sorted(cli) == sorted(spark_rows) == [0, 1]
    assert cli[1] == spark_rows[1] == []  # the other queue is intact
    cli_bad, spark_bad = offsets_named(cli[0]), offsets_named(spark_rows[0])
    assert cli_bad == spark_bad, (cli[0], spark_rows[0])
    if case.name == "intact":
        assert cli_bad == set()
        return
    assert cli_bad, f"the damage went unnoticed: {case.name}"
    unreadable = store_unreadable(built, 0)
    # The store reads around what it can rebuild (a damaged consume queue): it never
    # fails where the checkers saw nothing, and never returns wrong bytes.
    assert unreadable <= cli_bad, (unreadable, cli[0])
