"""The jobs: export to Parquet, verify (finds damage), compact (merges what was left)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server
from tests.spark.conftest import PER_QUEUE, QUEUES, UNITS_PER_SEGMENT, BuiltStore, build_store
from tests.spark.test_export import table_rows
from tests.spark.test_read import assert_same, rows_of
from tieredstore.checksum import crc32c, format_crc
from tieredstore.cli import main as cli_main
from tieredstore.objectstore import LocalObjectStore
from tieredstore.objectstore.reads import CRC_METADATA_KEY
from tieredstore.segment import FileType
from tieredstore.spark import jobs
from tieredstore.spark.jobs.compact import survey
from tieredstore.spark.read.selection import Selection
from tieredstore.store import UNIT_SIZE
from tieredstore.store.formats.keys import segment_path

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHUNK = 4096


def test_export_writes_a_delta_table_that_reads_back(merged_store: BuiltStore, spark: Any,
                                                     tmp_path: Path) -> None:
    out = tmp_path / "export"
    filters = jobs.Filters(topics=("orders",))
    written = jobs.export(spark, merged_store.options, str(out), filters)
    want = merged_store.rows(topic="orders")
    assert written.rows == len(want)
    assert_same(table_rows(spark, out), want)


# --- verify ---------------------------------------------------------------------------

async def overwrite_chunk(built: BuiltStore, topic: str, queue_id: int, position: int,
                          flip_at: int, *, fix_crc: bool) -> None:
    """Flip one byte of the commit-log chunk at ``position`` (of segment 0). The object's
    metadata is kept (its CRC32C then no longer matches) or, with ``fix_crc``, made to
    match the new bytes, so that only the record's own CRC can tell."""
    store = LocalObjectStore(built.path, fsync=False)
    try:
        key = segment_path(built.config, topic, queue_id, FileType.COMMIT_LOG, 0) \
            .chunk_key(position)
        got = await store.get_object(key)
        data = bytearray(got.data)
        data[flip_at] ^= 0xFF
        metadata = dict(got.info.metadata)
        if fix_crc:
            metadata[CRC_METADATA_KEY] = format_crc(crc32c(bytes(data)))
        await store.put(key, bytes(data), metadata=metadata)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def damaged_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[BuiltStore, int, int]:
    """Three queues of topic ``v``, sealed segments left as chunks. v/0: a chunk's
    bytes no longer match its CRC; v/1: one record's bytes do not (chunk CRC fixed);
    v/2: intact. Returns the store and the damaged offsets of v/0 (first) and v/1."""
    built = build_store(tmp_path_factory.mktemp("damaged"),
                        queues=(("v", 0), ("v", 1), ("v", 2)), merge_on_seal=False)
    asyncio.run(overwrite_chunk(built, "v", 0, CHUNK, 100, fix_crc=False))
    asyncio.run(overwrite_chunk(built, "v", 1, CHUNK, 100, fix_crc=True))
    return built, built.record_at("v", 0, CHUNK), built.record_at("v", 1, CHUNK + 100)


def test_verify_names_every_damaged_record(spark: Any,
                                           damaged_store: tuple[BuiltStore, int, int]) -> None:
    built, first_bad_chunk, bad_record = damaged_store
    last_bad_chunk = built.record_at("v", 0, 2 * CHUNK - 1)
    df = jobs.verify(spark, built.options)
    rows = {(r.topic, r.queue_id): r for r in df.collect()}
    assert sorted(rows) == [("v", 0), ("v", 1), ("v", 2)]

    intact = rows[("v", 2)]
    assert intact.error_count == 0 and intact.errors == [], intact.errors
    assert (intact.messages, intact.min_offset, intact.max_offset) == (PER_QUEUE, 0, PER_QUEUE)
    assert intact.units > 0 and intact.checked_bytes > 0
    # the store's one count of a queue's segments (QueueSummary.segments), as stats shows it
    stats = {(r.topic, r.queue_id): r.segments for r in jobs.stats(spark, built.options).collect()}
    assert intact.segments == stats[("v", 2)] > PER_QUEUE // UNITS_PER_SEGMENT + 1

    chunk = rows[("v", 0)]
    assert chunk.error_count == 1
    damaged = last_bad_chunk - first_bad_chunk + 1
    assert chunk.messages == PER_QUEUE - damaged
    assert len(chunk.errors) == 1, chunk.errors
    assert chunk.errors[0].startswith(
        f"v/0: offsets [{first_bad_chunk}, {last_bad_chunk + 1}): "), chunk.errors
    assert "CRC32C" in chunk.errors[0]

    record = rows[("v", 1)]
    assert record.error_count == 1
    assert record.messages == PER_QUEUE - 1
    assert len(record.errors) == 1, record.errors
    assert re.match(rf"v/1: offset {bad_record}: record at commit-log byte \d+: "
                    r"record fails its CRC32C", record.errors[0]), record.errors
    assert record.max_offset == PER_QUEUE  # the scan went on past the damage


def test_reading_a_damaged_record_fails_naming_it(spark: Any,
                                                  damaged_store: tuple[BuiltStore, int, int]
                                                  ) -> None:
    built, _, bad_record = damaged_store
    df = (spark.read.format("tieredstore").options(**built.options)
          .option("topic", "v").option("queue_id", "1").load())
    with pytest.raises(Exception, match=rf"v/1: offset {bad_record}: .*fails its CRC32C"):
        df.count()


def test_verify_command_line_exit_status(spark: Any, damaged_store: tuple[BuiltStore, int, int],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    built, _, _ = damaged_store
    args = ["spark", "verify", "--data-dir", str(built.path), "--topic", "v"]
    assert cli_main([*args, "--queue", "2"]) == 0
    assert f"queues 1, messages {PER_QUEUE}, errors 0" in capsys.readouterr().out
    assert cli_main([*args, "--queue", "0,1", "--max-errors", "1"]) == 1
    got = capsys.readouterr()
    assert "queues 2, messages" in got.out and ", errors 2" in got.out
    assert got.err.count("v/0: offsets") == 1 and "v/1: offset" not in got.err  # --max-errors 1
    # The one report, rendered alike: the plain command's --json, queue for queue.
    assert cli_main([*args, "--json"]) == 1
    spark_doc = json.loads(capsys.readouterr().out)
    assert cli_main(["verify", "--data-dir", str(built.path), "--topic", "v", "--json"]) == 1
    plain_doc = json.loads(capsys.readouterr().out)
    assert spark_doc.keys() == plain_doc.keys() == {"queues", "messages", "error_count",
                                                    "requests"}
    assert spark_doc["queues"] == plain_doc["queues"]
    assert (spark_doc["messages"], spark_doc["error_count"]) == (
        plain_doc["messages"], plain_doc["error_count"]) == (
        sum(q["messages"] for q in plain_doc["queues"]), 2)
    assert spark_doc["requests"]["get"] > 0  # the tasks' requests, summed


# --- compact ---------------------------------------------------------------------------

def objects_under(built: BuiltStore) -> dict[str, bytes]:
    async def run() -> dict[str, bytes]:
        store = LocalObjectStore(built.path, fsync=False)
        try:
            infos = await store.list_all("")
            return {i.key: await store.get(i.key) for i in infos if "/meta" not in i.key}
        finally:
            await store.close()

    return asyncio.run(run())


def test_compact_merges_sealed_segments_and_leaves_active_ones(spark: Any,
                                                                tmp_path: Path) -> None:
    built = build_store(tmp_path / "store", queues=QUEUES[:2], merge_on_seal=False)
    before = objects_under(built)

    async def targets() -> list[Any]:
        store = LocalObjectStore(built.path, fsync=False)
        try:
            return (await survey(store, built.config, Selection())).targets
        finally:
            await store.close()

    found = asyncio.run(targets())
    sealed_dirs = {k.rsplit("/", 1)[0] for k in before if k.endswith("/sealed")}
    assert len(found) == len(sealed_dirs) > 2 * (PER_QUEUE // UNITS_PER_SEGMENT)

    df, skipped = jobs.compact(spark, built.options)
    results = df.collect()
    assert skipped == []
    assert len(results) == len(found)
    assert all(r.merged and r.error is None for r in results), [r for r in results
                                                               if not r.merged]
    after = objects_under(built)
    for directory in sealed_dirs:
        # the merged object, and the zero-byte fences writers' opens left (kept)
        left = sorted(k for k, v in after.items() if k.startswith(directory + "/") and v)
        assert left == [directory + "/segment"], left
    active = {k: v for k, v in before.items() if k.rsplit("/", 1)[0] not in sealed_dirs}
    assert active, "no active segment to keep"
    for key, data in active.items():
        assert after.get(key) == data, f"active segment object {key} changed"

    again, _ = jobs.compact(spark, built.options)
    assert again.count() == 0
    read = spark.read.format("tieredstore").options(**built.options).load()
    assert_same(rows_of(read), built.rows())


# --- stats ----------------------------------------------------------------------------

def listed(built: BuiltStore) -> list[tuple[str, int]]:
    async def run() -> list[tuple[str, int]]:
        store = LocalObjectStore(built.path, fsync=False)
        try:
            return [(i.key, i.size) for i in await store.list_all("")]
        finally:
            await store.close()

    return asyncio.run(run())


def per_queue(built: BuiltStore, topic: str, queue_id: int, test: Any) -> int:
    """Objects of one queue's segments that ``test(name, size)`` picks."""
    mark = f"/{topic}/{queue_id}/"
    return sum(1 for key, size in listed(built)
               if mark in key and "/meta" not in key and test(key.rsplit("/", 1)[1], size))


def test_stats_sums_up_each_queue_before_and_after_compact(spark: Any, tmp_path: Path) -> None:
    built = build_store(tmp_path / "store", queues=QUEUES[:2], merge_on_seal=False)
    sealed = {q: per_queue(built, *q, lambda n, s: n == "sealed") for q in QUEUES[:2]}
    assert min(sealed.values()) > 2

    def check(rows: list[Any], *, merged: bool) -> None:
        assert [(r.topic, r.queue_id) for r in rows] == sorted(QUEUES[:2])
        for r in rows:
            written = built.messages[(r.topic, r.queue_id)]
            assert r.error is None
            assert (r.messages, r.min_offset, r.max_offset) == (PER_QUEUE, 0, PER_QUEUE)
            assert int(r.oldest.timestamp() * 1000) == written[0].timestamp
            assert int(r.newest.timestamp() * 1000) == written[-1].timestamp
            bodies = sum(len(w.body) for w in written)
            assert bodies < r.commitlog_bytes < bodies + 300 * PER_QUEUE
            assert r.consumequeue_bytes == PER_QUEUE * UNIT_SIZE
            assert r.index_bytes == 32 * sum(len(w.keys) for w in written)  # one entry a key
            assert r.unmerged_segments == (0 if merged else sealed[(r.topic, r.queue_id)])
            assert r.chunks == per_queue(built, r.topic, r.queue_id,
                                         lambda n, s: n.startswith("chunk-") and s > 0)
            # the sealed ones, and the active commit log, consume queue and key index
            assert r.segments == sealed[(r.topic, r.queue_id)] + 3

    check(jobs.stats(spark, built.options).collect(), merged=False)
    jobs.compact(spark, built.options)
    check(jobs.stats(spark, built.options).collect(), merged=True)


def test_the_spark_command_runs_the_jobs(spark: Any, merged_store: BuiltStore,
                                         tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``tieredstore spark``: the store options every command takes, before or after
    the job's name; an unknown topic is an error before Spark runs; the session
    that was running stays running."""
    path = str(merged_store.path)
    assert cli_main(["spark", "--master", "local[2]", "stats", "--data-dir", path,
                     "--topic", "orders"]) == 0
    out = capsys.readouterr().out
    assert f"3 queue(s), {3 * PER_QUEUE} messages" in out, out
    assert cli_main(["--data-dir", path, "spark", "verify", "--queue", "0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["error_count"] == 0 and len(report["queues"]) == 2, report
    assert {q["queue"] for q in report["queues"]} == {0}
    assert cli_main(["spark", "stats", "--data-dir", str(tmp_path / "nothing")]) == 2
    assert "is not a directory: no store to read" in capsys.readouterr().err
    assert cli_main(["spark", "stats", "--data-dir", path, "--topic", "nope"]) == 2
    assert "unknown topic 'nope'" in capsys.readouterr().err
    assert spark.range(3).count() == 3


# --- compact --log ------------------------------------------------------------------------

def test_compact_log_moves_each_brokers_backlog_into_chunks(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two brokers' stores left pieces in their logs (quiet queues, closed before
    compaction by age); one task per broker compacts them with the store's code."""
    built = {}
    for broker in ("broker-a", "broker-b"):
        built[broker] = build_store(tmp_path / "store", queues=QUEUES[:2], per_queue=40,
                                    broker=broker, write_mode="log",
                                    group_commit_interval=0.0, gc_interval=0.0)
    options = {"path": str(tmp_path / "store")}
    logs = [k for k, size in listed(built["broker-a"]) if "/log/log-" in k and size]
    assert len(logs) > 2
    rows = jobs.compact_logs(spark, options, ["broker-a", "broker-b"]).collect()
    assert [r.broker for r in rows] == ["broker-a", "broker-b"]
    for r in rows:
        assert r.error is None and r.queues == 2
        assert r.log_objects_before > 2 and r.log_objects_after == 0, r
    assert [k for k, size in listed(built["broker-a"]) if "/log/log-" in k and size] == []
    for broker, b in built.items():
        read = spark.read.format("tieredstore").options(**options, broker=broker).load()
        assert_same(rows_of(read), b.rows())
    again = ["spark", "compact", "--data-dir", options["path"], "--log", "--log-broker",
             "broker-b"]
    assert cli_main(again) == 0
    assert "broker-b: 2 queue(s); log objects 0 -> 0" in capsys.readouterr().out


def test_the_spark_command_reads_a_bucket_named_by_flags(
        spark: Any, moto: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The store options every command takes name a bucket for the jobs too: produced
    and read by flags (no config file); the credentials from the configuration's
    environment, set after the session started: they travel to the executors in
    the configuration resolved here (export's data source read too, bound to it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TIEREDSTORE_S3_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("TIEREDSTORE_S3_SECRET_ACCESS_KEY", SECRET_KEY)
    flags = ["--bucket", f"spark-cli-{tmp_path.name}"[:63], "--endpoint", moto.endpoint_url,
             "--region", "us-east-1"]
    for queue in ("0", "1"):
        assert cli_main(["produce", "--topic", "s3", "--queue", queue, "--count", "7", "-q",
                         "--create-bucket", *flags]) == 0
    capsys.readouterr()
    assert cli_main(["spark", "stats", "--json", "--topic", "s3", "--queue", "1", *flags]) == 0
    out = capsys.readouterr()
    stats = json.loads(out.out)["queues"]
    assert [(r["topic"], r["queue"], r["messages"], r["max_offset"]) for r in stats] == [
        ("s3", 1, 7, 7)]
    assert SECRET_KEY not in out.out + out.err
    # verify on the same bucket, by the same flags: one JSON document.
    assert cli_main(["spark", "verify", "--json", *flags]) == 0
    verified = json.loads(capsys.readouterr().out)
    assert verified["error_count"] == 0 and {(q["queue"], q["messages"])
                                             for q in verified["queues"]
                               if q["topic"] == "s3"} == {(0, 7), (1, 7)}, verified
    # Spark's Python processes have no credentials of their own (the session started
    # before they were set): export reads through the data source, bound to the
    # configuration the command resolved.
    assert spark.sparkContext.parallelize([0], 1).map(lambda _: sorted(
        k for k in os.environ if k.startswith(("AWS_ACCESS", "AWS_SECRET", "TIEREDSTORE_S3"))
    )).collect() == [[]]
    table = tmp_path / "table"
    assert cli_main(["spark", "export", "--json", "--output", str(table), *flags]) == 0
    out = capsys.readouterr()
    exported = json.loads(out.out)
    assert (exported["rows"], exported["sequence"]) == (14, 0), exported
    assert [(r["topic"], r["queue"], r["first_offset"], r["end_offset"])
            for r in exported["exported"]] == [("s3", 0, 0, 7), ("s3", 1, 0, 7)]
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert sorted((r["topic"], r["queue_id"], r["offset"]) for r in rows) == [
        ("s3", q, o) for q in (0, 1) for o in range(7)]
    assert all(r["body"].startswith(f"message {r['offset']} ".encode()) for r in rows)
    assert cli_main(["spark", "compact", "--json", *flags]) == 0
    compacted = json.loads(capsys.readouterr().out)
    assert compacted["merged"] == len(compacted["segments"]), compacted
    assert SECRET_KEY not in out.out + out.err
