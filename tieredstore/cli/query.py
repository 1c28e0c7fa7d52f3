"""``tieredstore query``: find a topic's messages by key (read-only).

Looks the key up in the key index of every queue of the topic (a message's
keys, and the unique id in its ``UNIQ_KEY`` property), as
``query_by_key`` does, over what is durable in the bucket; each message found
is read and checked. Prints ``queue, offset, store time, body`` a line;
``--json`` one object a line, the shape ``consume --json`` prints. An unknown
topic is an error (exit 2) naming it; a known topic without the key prints
nothing (exit 0).
"""

from __future__ import annotations

import argparse
import sys

from tieredstore import sync
from tieredstore.store import MAX_TIMESTAMP, Message

from .common import check_selected, positive_int, read_only_store
from .consume import as_json, as_text, parse_time


async def query(args: argparse.Namespace) -> list[Message]:
    async with await read_only_store(args) as store:
        found = await store.query_by_key(args.topic, args.key, args.from_time,
                                         args.until_time, args.count)
        if not found:
            check_selected(await store.queues(), args.topic)
        return found


HELP = "find a topic's messages by key (read-only)"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="the topic (each of its queues)")
    parser.add_argument("--key", required=True, help="a message key or unique id")
    parser.add_argument("--from-time", type=parse_time, default=0, metavar="TIME",
                        help="stored at or after TIME: ms since the epoch or ISO 8601")
    parser.add_argument("--until-time", type=parse_time, default=MAX_TIMESTAMP, metavar="TIME",
                        help="stored at or before TIME")
    parser.add_argument("--count", type=positive_int, default=64, metavar="N",
                        help="the newest N messages at most (default 64)")


def run(args: argparse.Namespace) -> int:
    found = sync.run(query(args))
    for message in found:
        print(as_json(message) if args.json else
              f"{message.queue_id}\t{as_text(message)}")
    if not args.quiet:
        print(f"found {len(found)} message(s) of {args.topic} with key {args.key!r}",
              file=sys.stderr)
    return 0
