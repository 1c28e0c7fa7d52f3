"""``tieredstore inspect``: what the bucket holds, read-only, on every broker of
the cluster (``--broker`` narrows: ``a`` or ``a,b``).

- ``topics``: each broker's topics: their queues there, messages and bytes;
- ``queues`` (the default): each queue's offsets, segments, bytes, last writer;
- ``segments``: each segment of each flat file: base, size, state, whether it
  is sealed, merged, recorded in the metadata, trimmed (deletion pending);
- ``chunks``: the units of each segment (chunk objects, or ranges of the
  merged object) with their CRC32C;
- ``brokers``: each broker's newest writer as its liveness record says (who,
  live, closed, stale or unknown, last seen when; docs/writers.md, Liveness
  records). ``queues`` ends with the same lines.

A queue is ``(broker, topic, queue id)``: every row names its broker, and
the text tables have a broker column. Nothing is written and no queue is
claimed: the brokers are listed (one paged LIST of the cluster's metadata
root, none with ``--broker``), the metadata is read with
``QueueMetadata.open_read_only`` and segments are found by listing, after one
load of each broker's log. The queues are those an open finds: those with
metadata, and those whose bytes are in log objects (a queue with no head
there shows with no writer). A queue whose metadata is lost (its segments are
in the bucket but its heads are gone or all damaged: what ``verify`` reports
and ``repair`` rebuilds, :func:`~tieredstore.store.queues_to_rebuild`; the
store's keys are listed once for every broker) is listed too: in ``queues``
with why in ``lost``, and its numbers when a reader can still open it (its
bytes in log objects), else none; in ``segments`` and ``chunks`` with its
segments as listed, none recorded. Numbers are what is durable in the bucket
(see :mod:`tieredstore.store.read.view`). ``--topic`` or ``--queue`` naming
nothing on the brokers read is an error (exit 2), which names the brokers
that have it when ``--broker`` left them out; so is a ``--broker`` the
cluster does not have.

``--json``: one JSON array, an object per row, each with ``broker`` first.
``topics``: ``broker, topic, queues, messages, commitlog_bytes,
consumequeue_bytes, index_bytes`` (one row per broker a topic is on).
``queues``: ``broker, topic, queue, min_offset, max_offset`` (offsets ``[min,
max)``), ``messages, segments``, ``{commitlog,consumequeue,index}_{segments,bytes}``,
``merges_pending, writer, head_version`` (null for a lost queue no reader can
open), and ``lost`` (why, for a queue whose metadata is lost). ``segments``:
``broker, topic, queue, type, base, size, state, sealed, merged, recorded,
trimmed, first_offset, end_offset`` (the record's offsets, half-open ``[first,
end)`` as everywhere; null for a segment with no record), ``units, objects,
object_bytes, error``: ``object_bytes`` is the size of the segment's own
objects (its chunks or merged object), 0 while its bytes are still in the
broker's log objects (a queue's live bytes in the bucket are ``stored_bytes``
in ``tieredstore metrics``). ``chunks``: ``broker, topic, queue, type, base,
position, length, object, object_offset, crc32c`` (hex); ``object`` is the key
below the queue's file (``seg-.../chunk-...``, ``seg-.../segment``) or, for a
unit held in the broker's log, that log object's whole key. ``brokers``:
``broker, writer, host, pid, state, started_ms, last_seen_ms,
heartbeat_interval_s`` (``writer`` and the rest null when no record is
there).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tieredstore import sync
from tieredstore.config import TieredStoreConfig, human_size
from tieredstore.errors import TieredStoreError
from tieredstore.store import (
    FileType,
    ListedFile,
    LogSnapshot,
    ObjectStore,
    SegmentState,
    SegmentView,
    list_recorded,
    list_segments,
    listed_queues,
    load_log,
    open_metadata,
    queues_to_rebuild,
    store_keys,
    summarize,
    unit_crc,
    writer_seen,
)
from tieredstore.tasks import gather_bounded

from ..common import (
    CliError,
    check_in_cluster,
    nonnegative_int,
    print_json,
    read_only_cluster,
    table,
)

QUEUE_CONCURRENCY = 8

Row = dict[str, Any]


NUMBERS = ("min_offset", "max_offset", "messages", "segments", "commitlog_segments",
           "commitlog_bytes", "consumequeue_segments", "consumequeue_bytes", "index_segments",
           "index_bytes", "merges_pending", "writer", "head_version")
"""A queue row's numbers: none for a lost queue that cannot be read."""


async def queue_rows(store: ObjectStore, config: TieredStoreConfig,
                     queues: Sequence[tuple[str, int]], log: LogSnapshot | None = None,
                     lost: Mapping[tuple[str, int], str] | None = None) -> list[Row]:
    """``log``: the broker's log as loaded before this call (loaded here if None);
    ``lost``: why each queue whose metadata is lost lost it."""
    log = log or await load_log(store, config)
    lost = lost or {}

    async def one(topic: str, queue_id: int) -> Row:
        why = lost.get((topic, queue_id))
        try:
            got = await summarize(store, config, topic, queue_id, log=log, timestamps=False)
        except TieredStoreError:
            if why is None:
                raise
            return {"broker": config.broker, "topic": topic, "queue": queue_id,
                    **dict.fromkeys(NUMBERS), "lost": why}
        row: Row = {"broker": config.broker, "topic": topic, "queue": queue_id,
                    "min_offset": got.min_offset,
                    "max_offset": got.max_offset, "messages": got.messages,
                    "segments": got.segments}
        for label, flat in (("commitlog", got.commit_log), ("consumequeue", got.consume_queue),
                            ("index", got.index)):
            row[f"{label}_segments"] = flat.segments
            row[f"{label}_bytes"] = flat.bytes
        row["merges_pending"] = got.merges_pending
        row["writer"] = got.writer
        row["head_version"] = got.head_version
        row["lost"] = why
        return row

    return await gather_bounded(QUEUE_CONCURRENCY, lambda q: one(*q), queues)


def topic_rows(queues: Sequence[Row]) -> list[Row]:
    """A row per topic of each broker: its queues there summed."""
    topics: dict[tuple[str, str], Row] = {}
    for q in queues:
        row = topics.setdefault((q["broker"], q["topic"]), {
            "broker": q["broker"], "topic": q["topic"], "queues": 0, "messages": 0,
            "commitlog_bytes": 0, "consumequeue_bytes": 0, "index_bytes": 0})
        row["queues"] += 1
        for key in ("messages", "commitlog_bytes", "consumequeue_bytes", "index_bytes"):
            row[key] += q[key] or 0  # none: a lost queue that cannot be read
    return list(topics.values())


def segment_row(topic: str, queue_id: int, file_type: FileType, first: int,
                view: SegmentView) -> Row:
    record = view.record
    return {
        "topic": topic, "queue": queue_id, "type": file_type.label, "base": view.base,
        "size": view.size, "state": view.state_name,
        "sealed": view.state is not None and view.state is not SegmentState.OPEN,
        "merged": view.state is SegmentState.SEALED,
        "recorded": record is not None, "trimmed": view.base < first,
        "first_offset": record.first_message_offset if record is not None else None,
        "end_offset": record.last_message_offset + 1 if record is not None else None,
        "units": len(view.layout), "objects": len(view.objects),
        "object_bytes": view.stored_bytes, "error": view.error,
    }


async def chunk_rows(store: ObjectStore, topic: str, queue_id: int, file_type: FileType,
                     view: SegmentView) -> list[Row]:
    rows = []
    for unit in view.layout.units:
        crc = await unit_crc(store, unit)
        rows.append({"topic": topic, "queue": queue_id, "type": file_type.label,
                     "base": view.base, "position": unit.position, "length": unit.length,
                     "object": unit.key.removeprefix(view.path.file_prefix),
                     "object_offset": unit.object_offset,
                     "crc32c": f"{crc:08x}" if crc is not None else None})
    return rows


def _size(n: int | None) -> str | None:
    return None if n is None else human_size(n, exact=False)


def render(what: str, rows: list[Row]) -> str:
    if what == "topics":
        return table([[r["broker"], r["topic"], r["queues"], r["messages"],
                       human_size(r["commitlog_bytes"] + r["consumequeue_bytes"]
                                   + r["index_bytes"], exact=False)]
                      for r in rows], ["broker", "topic", "queues", "messages", "bytes"])
    if what == "queues":
        return table([[r["broker"], r["topic"], r["queue"], r["min_offset"], r["max_offset"],
                       r["segments"], r["commitlog_segments"], r["consumequeue_segments"],
                       _size(r["commitlog_bytes"]), _size(r["consumequeue_bytes"]),
                       _size(r["index_bytes"]) if r["index_segments"] else "-",
                       r["merges_pending"], r["writer"] or "-"] for r in rows],
                     ["broker", "topic", "queue", "min", "max", "segments", "cl segs", "cq segs",
                      "cl bytes", "cq bytes", "key index", "merging", "writer"]) + "".join(
            f"\n{r['broker']} {r['topic']}/{r['queue']}: metadata lost ({r['lost']}): "
            f"`tieredstore repair --broker {r['broker']}` rebuilds it from its segments"
            for r in rows if r["lost"])
    if what == "segments":
        return table([[r["broker"], r["topic"], r["queue"], r["type"], r["base"], r["size"],
                       r["state"], r["sealed"], r["merged"], r["recorded"],
                       "yes" if r["trimmed"] else "", r["first_offset"],
                       r["end_offset"], r["units"], r["object_bytes"]]
                      for r in rows],
                     ["broker", "topic", "queue", "type", "base", "size", "state", "sealed",
                      "merged", "recorded", "trimmed", "first", "end", "units",
                      "object bytes"]) + "".join(
            f"\n{r['broker']} {r['topic']}/{r['queue']} {r['type']}@{r['base']}: {r['error']}"
            for r in rows if r["error"])
    return table([[r["broker"], r["topic"], r["queue"], r["type"], r["base"], r["position"],
                   r["length"], r["object"], r["object_offset"], r["crc32c"]] for r in rows],
                 ["broker", "topic", "queue", "type", "base", "position", "length", "object",
                  "obj offset", "crc32c"])


async def broker_rows(store: ObjectStore, config: TieredStoreConfig) -> list[Row]:
    """The broker's newest writer, from its liveness record."""
    seen = await writer_seen(store, config)
    empty: Row = dict.fromkeys(("writer", "host", "pid", "state", "started_ms", "last_seen_ms",
                                "heartbeat_interval_s"))
    return [{"broker": config.broker,
             **(empty if seen is None else seen.document(time.time()))}]


def broker_line(row: Row) -> str:
    if row["writer"] is None:
        return f"broker {row['broker']}: no writer's liveness record"
    return (f"broker {row['broker']}: {row['state']} writer {row['writer']}, last seen "
            f"{max(0.0, time.time() - row['last_seen_ms'] / 1000):.0f} s ago")


async def inspect(args: argparse.Namespace) -> tuple[list[Row], list[Row]]:
    """The rows of ``args.what``, and the brokers' rows."""
    if args.what in ("topics", "queues", "brokers"):
        for option, value in (("--segment", args.segment), ("--type", args.type)):
            if value is not None:
                raise CliError(f"{option} selects segments and chunks only: "
                               f"inspect segments {option} {value} (or chunks)")
    async with await read_only_cluster(args) as cluster:
        store = cluster.store
        names = await cluster.brokers()
        brokers = [r for b in names for r in await broker_rows(store, cluster.config_of(b))]
        if args.what == "brokers":
            if cluster.selected is not None:
                await check_in_cluster(cluster)  # a broker named that the cluster lacks
            return brokers, brokers
        # Every broker's log loaded, then the store's keys listed once for all of them.
        logs = {b: await load_log(store, cluster.config_of(b)) for b in names}
        keys = await store_keys(store, cluster.config)
        topics = None if args.topic is None else [args.topic]
        queues: list[tuple[str, str, int]] = []
        lost: dict[tuple[str, str, int], str] = {}
        for broker in names:
            config = cluster.config_of(broker)
            lost |= {(broker, t, q): why for t, q, why in await queues_to_rebuild(
                store, config, log=logs[broker], keys=keys)
                if (topics is None or t in topics) and args.queue in (None, q)}
            named = await listed_queues(store, config, topics=topics, log=logs[broker])
            queues += [(broker, t, q) for t, q in named if args.queue in (None, q)]
        queues = sorted({*lost, *queues})
        if not queues and (args.topic is not None or args.queue is not None
                           or cluster.selected is not None):
            await check_in_cluster(cluster, args.topic, args.queue)
        if args.what in ("topics", "queues"):
            rows = [row for broker in names for row in await queue_rows(
                store, cluster.config_of(broker), [(t, q) for b, t, q in queues if b == broker],
                logs[broker], {(t, q): why for (b, t, q), why in lost.items() if b == broker})]
            return (topic_rows(rows) if args.what == "topics" else rows), brokers
        types = [FileType.from_label(args.type)] if args.type else list(FileType)

        async def files(broker: str, topic: str, queue_id: int
                        ) -> list[tuple[str, str, int, FileType, ListedFile]]:
            config, log = cluster.config_of(broker), logs[broker]
            try:
                meta = await open_metadata(store, config, topic, queue_id, log=log)
            except TieredStoreError:
                if (broker, topic, queue_id) not in lost:
                    raise
                return [(broker, topic, queue_id, t, ListedFile(await list_segments(
                    store, config, topic, queue_id, t, log=log), [], 0))  # none recorded
                        for t in types]
            return [(broker, topic, queue_id, t,
                     await list_recorded(store, config, meta, t, log=log)) for t in types]

        rows = []
        for broker, topic, queue_id, file_type, listed in [f for fs in await gather_bounded(
                QUEUE_CONCURRENCY, lambda q: files(*q), queues) for f in fs]:
            for view in listed.views:
                if args.segment is not None and view.base != args.segment:
                    continue
                if args.what == "segments":
                    rows.append({"broker": broker, **segment_row(
                        topic, queue_id, file_type, listed.first, view)})
                else:
                    rows += [{"broker": broker, **row} for row in await chunk_rows(
                        store, topic, queue_id, file_type, view)]
        return rows, brokers


HELP = "topics, queues, segments, chunks and sizes of every broker (read-only)"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="?", default="queues",
                        choices=("topics", "queues", "segments", "chunks", "brokers"),
                        help="what to list (default: queues)")
    parser.add_argument("--topic", help="only this topic")
    parser.add_argument("--queue", type=nonnegative_int, metavar="ID",
                        help="only this queue id")
    parser.add_argument("--type", choices=sorted(t.label for t in FileType),
                        help="segments/chunks: only this flat file type")
    parser.add_argument("--segment", type=nonnegative_int, metavar="BASE",
                        help="segments/chunks: only the segment at this base offset")


def run(args: argparse.Namespace) -> int:
    rows, brokers = sync.run(inspect(args))
    if args.json:
        print_json(rows)
        return 0
    if args.what == "brokers":
        print("\n".join(broker_line(r) for r in rows))
        return 0
    print(render(args.what, rows) if rows else f"no {args.what}")
    if args.what == "queues":
        print("\n".join(broker_line(r) for r in brokers))
    return 0
