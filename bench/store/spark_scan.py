"""Spark scan: the DataSource against the floor source, at 1 and 2 executor cores.

One store on the local backend holds 4 queues of 4 KiB messages (written by
``AsyncMessageStore`` at the defaults, the log compacted into chunks, sealed
segments merged). Each reader sums the body lengths of every message:

- **floor**: the same query over a Python DataSource that yields ready-made
  Arrow batches of the same rows (the reader's schema) and does nothing
  else: what PySpark's Python DataSource path costs by itself, the fastest
  any Python source of these rows can be. Each reader is judged against its
  floor (``x floor``), measured on the same cores just before the reader:
  the batch reader against a batch source, the streaming reader against a
  streaming source read by the same streaming query. A floor of the bodies
  alone is shown, not judged.
- **batch reader**: ``spark.read.format("tieredstore")`` and
  ``sum(length(body))`` (more readers: :data:`READERS`). A warm-up query
  starts the JVM and the Python workers first; the median of two runs is
  reported, each with a DataFrame of its own (one collected twice does not
  read again).
- **streaming reader**: ``spark.readStream.format("tieredstore")`` from the
  earliest offsets with ``Trigger.AvailableNow`` (a new checkpoint each run),
  ``sum(length(body))`` of each micro-batch added up on the driver.
- **get loop** (shown, not judged): one process, a read-only store (nothing
  cached), each queue read with ``get(max_count=256)`` to its end.

GETs: the get loop's are counted by its store; Spark's tasks run in other
processes, so theirs are counted by running the DataSource's own plan and
slice scans here, one store and fetcher per slice as each task has, on a
counting store (the same requests, in one process). ``units read``: the
distinct objects and byte ranges among them; GETs equal to it mean that no
byte was fetched twice.

Spark's figures hold below 1 GiB only loosely: its fixed cost per query
(planning, code generation, a task's start) is a second or so, which at
128 MiB is most of the time measured. ``full`` reads 1 GiB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import DEFAULTS, LOCAL, BenchEnv, KiB, MiB, Table, mb_per_s, median
from bench.store.consume import _KeepOpen
from tieredstore.objectstore import (
    ByteRange,
    ForwardingObjectStore,
    LocalObjectStore,
    ObjectData,
    ObjectStore,
)
from tieredstore.store import AsyncMessageStore, reading_fetcher

QUEUES = 4
MESSAGE = 4 * KiB
BATCH = 256
VOLUMES = {"full": 1024 * MiB, "quick": 128 * MiB, "tiny": 2 * MiB}
RUNS = 2
VOLUME_FILE = "bench-volume"  # beside the store: the floor source's size


async def fill(store: ObjectStore, volume: int) -> int:
    """``volume`` bytes of messages over :data:`QUEUES` queues; the body bytes."""
    config = DEFAULTS.replace(gc_interval=0)
    writer = await AsyncMessageStore.open(config, store=_KeepOpen(store))
    body = os.urandom(MESSAGE)
    per_queue = volume // QUEUES // MESSAGE
    for q in range(QUEUES):
        await writer.append_batch("scan", q, [body] * per_queue)
    await writer.flush()
    await writer.compact_log(time.time() + config.log_compact_age + 1)
    await writer.close()
    return per_queue * QUEUES * MESSAGE


async def get_loop(store: ObjectStore) -> tuple[float, int, int]:
    """Seconds, body bytes and GETs of one process reading every queue."""
    store.metrics.reset()
    reader = await AsyncMessageStore.open_read_only(DEFAULTS, store=_KeepOpen(store))
    try:
        started, nbytes = time.perf_counter(), 0
        for q in range(QUEUES):
            offset, end = 0, await reader.max_offset("scan", q)
            while offset < end:
                got = await reader.get("scan", q, offset, max_count=BATCH)
                nbytes += sum(len(m.body) for m in got)
                offset = got[-1].offset + 1
        return time.perf_counter() - started, nbytes, store.metrics.requests.get("get", 0)
    finally:
        await reader.close()


class _Reads(ForwardingObjectStore):
    """Counts GETs and the distinct (object, byte range) units they read."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.gets = 0
        self.units: set[tuple[str, ByteRange | None]] = set()

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        self.gets += 1
        self.units.add((key, byte_range))
        return await super().get_object(key, byte_range)


async def task_gets(path: Path) -> tuple[int, int, int]:
    """Slices planned, GETs of the DataSource's plan and slice scans (each
    slice read as its task reads it: columns), and the units they read."""
    from tieredstore.spark.read.plan import plan_read
    from tieredstore.spark.read.reader import scan_slice
    from tieredstore.spark.read.selection import Selection

    config = DEFAULTS.replace(backend=LOCAL, local_path=str(path))
    local = LocalObjectStore(path, fsync=False)
    store = _Reads(local)
    try:
        slices = await plan_read(store, config, Selection())
        for part in slices:
            fetcher = reading_fetcher(store, config)
            try:
                async for _ in scan_slice(config, part, on=(store, fetcher)):
                    pass
            finally:
                await fetcher.close()
        return len(slices), store.gets, len(store.units)
    finally:
        await local.close()


def spark_scan(path: Path, cores: int, *sources: str, runs: int = RUNS
               ) -> list[tuple[float, int]]:
    """Median seconds of ``sum(length(body))`` on ``local[cores]`` over each of
    ``sources`` (``floor``: :func:`_floor_source`), and the sum: in a process of
    its own (a session of its own, whatever this process runs), the sources in
    turn (one each, but for the smoke test's single runs).

    Its Python processes keep compiled bytecode, as an installed package's do,
    in a cache of their own beside the store: with ``PYTHONDONTWRITEBYTECODE``
    each of Spark's short-lived Python workers (a query starts several)
    compiled the library again, half a second of every query."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(path.parent / f"{path.name}-pycache")
    done = subprocess.run([sys.executable, "-m", "bench.store.spark_scan", str(path), str(cores),
                           ",".join(sources), str(runs)],
                          capture_output=True, text=True, check=False, timeout=1800, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the Spark scan failed: {done.stderr[-2000:]}")
    results = json.loads(done.stdout.strip().splitlines()[-1])
    return [(float(r["seconds"]), int(r["total"])) for r in results]


def _floor_source(nbytes: int, name: str) -> Any:
    """A Python DataSource that yields ``nbytes`` of ready-made Arrow batches over 4
    partitions, doing nothing else: the Spark floor. ``name`` says which:
    :data:`FLOOR` yields the reader's rows (its schema: constant topic, broker
    and queue, offsets, store times, empty keys and properties, no tags, 4 KiB
    bodies), :data:`FLOOR_BODY` the bodies alone, :data:`FLOOR_STREAM` the
    reader's rows as a streaming source of one micro-batch (``AvailableNow``)."""
    import pyarrow as pa
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )
    from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

    from tieredstore.spark.read.batches import ARROW_SCHEMA, SCHEMA

    rows = 1024
    batches = max(1, nbytes // QUEUES // (rows * MESSAGE))

    def batch(queue: int) -> Any:
        bodies = pa.array([os.urandom(MESSAGE)] * rows, pa.binary())
        if name == FLOOR_BODY:
            return pa.RecordBatch.from_arrays([bodies], names=["body"])
        empty = pa.repeat(pa.scalar(0, pa.int32()), rows + 1)
        strings = pa.array([], pa.string())
        return pa.RecordBatch.from_arrays([
            pa.repeat(pa.scalar("scan", pa.string()), rows),
            pa.repeat(pa.scalar("broker-0", pa.string()), rows),
            pa.repeat(pa.scalar(queue, pa.int32()), rows),
            pa.array(range(rows), pa.int64()),
            pa.array([0] * rows, ARROW_SCHEMA.field("store_timestamp").type),
            pa.ListArray.from_arrays(empty, strings, type=ARROW_SCHEMA.field("keys").type),
            pa.nulls(rows, pa.string()),
            pa.MapArray.from_arrays(empty, strings, strings,
                                    type=ARROW_SCHEMA.field("properties").type),
            bodies], schema=ARROW_SCHEMA)

    def read(partition: InputPartition) -> Any:
        ready = batch(partition.value)
        for _ in range(batches):
            yield ready

    class Reader(DataSourceReader):  # type: ignore[misc]
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(QUEUES)]

        def read(self, partition: InputPartition) -> Any:
            return read(partition)

    class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
        def initialOffset(self) -> dict[str, int]:
            return {"batch": 0}

        def getDefaultReadLimit(self) -> Any:
            return ReadAllAvailable()

        def prepareForTriggerAvailableNow(self) -> None:
            return None

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
            return {"batch": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            if start["batch"] >= end["batch"]:
                return []
            return [InputPartition(i) for i in range(QUEUES)]

        def read(self, partition: InputPartition) -> Any:
            return read(partition)

        def commit(self, end: dict[str, int]) -> None:
            return None

    class Floor(DataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> Any:
            return "body binary" if name == FLOOR_BODY else SCHEMA

        def reader(self, schema: Any) -> Reader:
            return Reader()

        def streamReader(self, schema: Any) -> StreamReader:
            return StreamReader()

    return Floor


def _query(spark: Any, source: str, path: str) -> int:
    """``sum(length(body))`` over ``source`` (a reader of :data:`READERS`, or the floor)."""
    if source in {STREAM, FLOOR_STREAM}:
        return _stream_query(spark, "tieredstore" if source == STREAM else source, path)
    df: Any = spark.read.format(source).option("path", path).load()
    return int(df.selectExpr("sum(length(body)) AS n").collect()[0].n)


def _stream_query(spark: Any, source: str, path: str) -> int:
    """``sum(length(body))`` of a streaming query over ``source`` from the earliest offsets with
    ``Trigger.AvailableNow`` (a checkpoint of its own each run), summed per
    micro-batch on the driver."""
    import tempfile

    total = 0

    def add(batch: Any, batch_id: int) -> None:
        nonlocal total
        total += int(batch.selectExpr("coalesce(sum(length(body)), 0) AS n").collect()[0].n)

    with tempfile.TemporaryDirectory(dir=Path(path).parent) as checkpoint:
        query = (spark.readStream.format(source).option("path", path).load()
                 .writeStream.foreachBatch(add).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    return total


def _scan_here(path: str, cores: int, sources: list[str], runs: int = RUNS
               ) -> list[dict[str, float]]:
    from tieredstore.spark import get_session

    spark = get_session(f"local[{cores}]", app_name="bench-spark-scan", conf={
        "spark.sql.shuffle.partitions": str(cores), "spark.python.worker.reuse": "true"})
    spark.sparkContext.setLogLevel("ERROR")

    def scan(source: str) -> int:
        # A new DataFrame and query each time: collecting one query again returns
        # what its first run computed, without reading (0.07 s for 128 MiB).
        return _query(spark, source, path)

    results = []
    try:
        for source in sources:
            if source in FLOORS:
                spark.dataSource.register(_floor_source(_volume_at(path), source))
            # A warm-up first (the JVM's and the workers' start), but for a single
            # run: the smoke test's, which times the code path only.
            total = scan(source) if runs > 1 else None
            seconds = []
            for _ in range(runs):
                started = time.perf_counter()
                summed = scan(source)
                if total is not None and summed != total:
                    raise AssertionError("two scans summed up different bodies")
                total = summed
                seconds.append(time.perf_counter() - started)
            results.append({"seconds": median(seconds), "total": float(total or 0)})
        return results
    finally:
        spark.stop()


FLOOR, FLOOR_BODY, FLOOR_STREAM, STREAM = "floor", "floor_body", "floor_stream", "stream"
FLOORS = (FLOOR, FLOOR_BODY, FLOOR_STREAM)
# The readers at each core count: (row label, source, its floor: the same query
# over ready-made rows).
READERS: list[tuple[str, str, str]] = [
    ("batch reader", "tieredstore", FLOOR),
    ("streaming reader, AvailableNow", STREAM, FLOOR_STREAM)]


async def run(env: BenchEnv) -> list[Table]:
    table = Table(
        "Spark scan: the DataSource against the floor source (local backend)",
        ["reader", "MB/s", "x floor", "x get loop", "GETs", "units read", "slices"],
        goal="each reader at least 0.7x the floor source at local[1] and at local[2]; "
             "GETs equal to the units read")
    if LOCAL not in env.backends:
        table.notes.append("not run: needs the local backend")
        return [table]
    try:
        import pyspark  # noqa: F401
    except ImportError:
        table.notes.append("not run: pyspark is not installed (the spark extra)")
        return [table]
    volume = VOLUMES[env.sizes.name]
    store = await env.store(LOCAL, "spark-scan")
    assert isinstance(store, LocalObjectStore)
    try:
        nbytes = await fill(store, volume)
        loop_s, loop_bytes, loop_gets = median_run([await get_loop(store) for _ in range(RUNS)])
        assert loop_bytes == nbytes, (loop_bytes, nbytes)
        slices, gets, units = await task_gets(store.root)
    finally:
        await store.close()
    loop_rate = mb_per_s(nbytes, loop_s)
    table.add("get loop, 1 process", f"{loop_rate:.0f}", "-", "1.00", loop_gets, "-", "-")
    (store.root / VOLUME_FILE).write_text(str(nbytes))
    tiny = env.sizes.name == "tiny"  # the smoke test: one JVM, the code path only
    ratios: dict[tuple[str, int], float] = {}
    for cores in (1,) if tiny else (1, 2):
        if not tiny:
            [(seconds, total)] = spark_scan(store.root, cores, FLOOR_BODY)
            assert total == nbytes, (total, nbytes)
            rate = mb_per_s(nbytes, seconds)
            table.add(f"local[{cores}], floor source, bodies only (not judged)", f"{rate:.0f}",
                      "-", f"{rate / loop_rate:.2f}", "-", "-", QUEUES)
        # The smoke test's single runs share one process; measured runs do not.
        smoke = iter(spark_scan(store.root, cores, *(r[1] for r in READERS), runs=1)
                     if tiny else ())
        for label, source, floor_source in READERS:
            floor = 0.0
            if not tiny:
                [(seconds, total)] = spark_scan(store.root, cores, floor_source)
                assert total == nbytes, (total, nbytes)
                floor = mb_per_s(nbytes, seconds)
                table.add(f"local[{cores}], floor of the {label}", f"{floor:.0f}", "1.00",
                          f"{floor / loop_rate:.2f}", "-", "-", QUEUES)
            seconds, total = next(smoke) if tiny else spark_scan(store.root, cores, source)[0]
            assert total == nbytes, (total, nbytes)
            rate = mb_per_s(nbytes, seconds)
            if floor:
                ratios[label, cores] = rate / floor
            table.add(f"local[{cores}], {label}", f"{rate:.0f}",
                      f"{rate / floor:.2f}" if floor else "-", f"{rate / loop_rate:.2f}",
                      gets, units, slices)
    table.notes.append(f"{nbytes / MiB:.0f} MiB of {MESSAGE // KiB} KiB bodies in {QUEUES} "
                       f"queues; Spark's GETs counted in-process (see bench/store/spark_scan.py)")
    table.notes.append("floor: a Python DataSource that only yields ready-made Arrow batches "
                       "of the same rows (the reader's schema), the fastest any Python source "
                       "of these rows can be here; the streaming reader's floor is such a "
                       "streaming source, read by the same query (AvailableNow, one "
                       "micro-batch); each reader's x floor is against its floor on the same "
                       "cores, measured just before it; the floor of bodies only is shown "
                       "for what Spark's conversion of the other columns costs")
    table.notes.append("a shared machine: absolute figures move with its load (see the load "
                       "average above); each ratio compares rows of this one run")
    for (label, cores), ratio in ratios.items():
        table.verdict(ratio >= 0.7, f"{label} at local[{cores}] at {ratio:.2f}x the floor")
    table.verdict(gets == units, f"{gets} GETs for {units} units read")
    return [table]


def median_run(runs: list[tuple[float, int, int]]) -> tuple[float, int, int]:
    return sorted(runs)[len(runs) // 2]


def _volume_at(path: str) -> int:
    return int((Path(path) / VOLUME_FILE).read_text())


if __name__ == "__main__":
    print(json.dumps(_scan_here(sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","),
                                int(sys.argv[4]))))
