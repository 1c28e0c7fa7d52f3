"""A streaming query reads what is durable without a writer: a log-mode writer
SIGKILLed with a busy queue (its consume queue held behind its commit log),
and no writer reopened; every offset below the last ``commit_offset`` it
reported is read once, by micro-batches that end inside the commit log's
durable tail (docs/reading.md, "The durable tail") as well as past it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.spark.test_stream import run
from tests.store.tail_writer import QUEUE, TOPIC, WRITER, body, config, run_and_kill
from tieredstore.objectstore import LocalObjectStore
from tieredstore.segment import DirectReader
from tieredstore.spark.read.plan import plan_read
from tieredstore.spark.read.reader import scan_slice
from tieredstore.spark.read.selection import Selection, Span
from tieredstore.store import UNIT_SIZE, OffsetOutOfRange, ReadOnlyMessageStore

pytestmark = [pytest.mark.spark]

BROKER = "broker-0"


async def _ends(root: Path) -> tuple[int, int]:
    """The consume queue's end and a read-only view's max offset."""
    async with await ReadOnlyMessageStore.open(config(str(root), **WRITER)) as reader:
        view = await reader.queue(TOPIC, QUEUE)
        return view.cq.end // UNIT_SIZE, await reader.max_offset(TOPIC, QUEUE)


async def _planned_whole(root: Path, lo: int, hi: int) -> list[int]:
    """The offsets a streaming batch's plan of ``[lo, hi)`` reads, as its tasks do."""
    cfg = config(str(root), **WRITER)
    store = LocalObjectStore(root, fsync=False)
    try:
        found: list[int] = []
        selection = Selection(queue_offsets={(BROKER, TOPIC, QUEUE): Span(lo, hi - 1)})
        for part in await plan_read(store, cfg, selection, whole=True):
            async for batch in scan_slice(cfg, part, on=(store, DirectReader(store))):
                assert batch.columns is not None
                found += batch.columns.offsets().tolist()
        return found
    finally:
        await store.close()


def _sunk(spark: Any, sink: Path) -> list[tuple[int, bytes]]:
    rows = spark.read.parquet(str(sink / "data")).select("offset", "body").collect()
    return sorted((r[0], bytes(r[1])) for r in rows)


def test_a_stream_reads_a_sigkilled_writers_commit_offset_once(
        spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "data"
    said = run_and_kill(root)
    assert said and said[-1] > 0, f"the writer printed no commit offset: {said}"
    committed = said[-1]
    units, top = asyncio.run(_ends(root))
    assert units < committed <= top, f"consume queue {units}, commit_offset {committed}, " \
                                     f"read-only max {top}"
    expected = [(i, body(i)) for i in range(top)]
    options = {k: str(v) for k, v in WRITER.items()}

    # One batch to the view's end.
    run(spark, root, tmp_path / "all", options=options)
    assert _sunk(spark, tmp_path / "all") == expected

    # The first batch ends inside the durable tail, the second starts there.
    cut = units + (top - units) // 2
    assert units < cut < top
    query = run(spark, root, tmp_path / "cut", options={**options,
                                                         "maxOffsetsPerTrigger": str(cut)})
    counts = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert counts[0] == cut and max(counts) <= cut and sum(counts) == top, counts
    got = _sunk(spark, tmp_path / "cut")
    assert len(got) == top and got == expected, \
        f"{len(got)} rows; missing {sorted(set(range(top)) - {o for o, _ in got})[:10]}"

    # A range that cannot be read in full fails, naming it, rather than read fewer.
    assert asyncio.run(_planned_whole(root, cut, top)) == list(range(cut, top))
    with pytest.raises(OffsetOutOfRange, match=rf"offsets \[{top}, {top + 5}\)"):
        asyncio.run(_planned_whole(root, cut, top + 5))
