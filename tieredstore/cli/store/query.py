"""``tieredstore query``: find a topic's messages by key (read-only).

Looks the key up in the key index of every queue of the topic on every broker
of the cluster (``--broker`` narrows): a message's keys, and the unique id in
its ``UNIQ_KEY`` property, as ``query_by_key`` does, over what is durable in
the bucket; each message found is read and checked; the newest ``--count``
across the brokers are printed, oldest first. Prints ``broker, queue,
offset, store time, body`` a line; ``--json`` one object a line, the shape
``consume --json`` prints (``broker`` first). A topic no broker read has is
an error (exit 2) naming it (and the brokers that have it, when ``--broker``
left them out); a known topic without the key prints nothing (exit 0).

Requests: one paged LIST of the cluster's metadata root (none with
``--broker``), then per broker one paged LIST of its queue heads and, where
the topic is, what ``query_by_key`` reads there.
"""

from __future__ import annotations

import argparse
import sys

from tieredstore import sync
from tieredstore.store import MAX_TIMESTAMP, Message

from ..common import check_in_cluster, positive_int, read_only_cluster
from .consume import as_json, as_text, parse_time


async def query(args: argparse.Namespace) -> list[tuple[str, Message]]:
    async with await read_only_cluster(args) as cluster:
        found = await cluster.query_by_key(args.topic, args.key, args.from_time,
                                           args.until_time, args.count)
        if not found:
            await check_in_cluster(cluster, args.topic)
        return found


HELP = "find a topic's messages by key on every broker (read-only)"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True,
                        help="the topic (each of its queues, on every broker)")
    parser.add_argument("--key", required=True, help="a message key or unique id")
    parser.add_argument("--from-time", type=parse_time, default=0, metavar="TIME",
                        help="stored at or after TIME: ms since the epoch or ISO 8601")
    parser.add_argument("--until-time", type=parse_time, default=MAX_TIMESTAMP, metavar="TIME",
                        help="stored at or before TIME")
    parser.add_argument("--count", type=positive_int, default=64, metavar="N",
                        help="the newest N messages at most (default 64)")


def run(args: argparse.Namespace) -> int:
    found = sync.run(query(args))
    for broker, message in found:
        print(as_json(message, broker) if args.json else
              f"{broker}\t{message.queue_id}\t{as_text(message)}")
    if not args.quiet:
        print(f"found {len(found)} message(s) of {args.topic} with key {args.key!r}",
              file=sys.stderr)
    return 0
