"""``tieredstore consume``: print messages of one queue.

Read-only: the queue's metadata is read without claiming it and segments are
found by listing, so a broker writing the store is not disturbed. It sees
what is durable in the bucket (see :mod:`tieredstore.store.view`). Every
record is checked (CRC32C, offset) as ``get`` checks it.

Prints ``offset, store time, body`` a line (tabs between; in the body newlines,
tabs and backslashes escaped as ``\\n``, ``\\t``, ``\\\\``, and bytes that are not
UTF-8 as ``\\xNN``), and a summary on stderr (the offsets consumed,
``[first, end)``). ``--json``: one JSON object a line, ``{"topic", "queue",
"offset", "timestamp" (ms), "time" (ISO 8601), "keys" [...], "tags" (null:
none), "properties" {...}, "encoding" ("utf-8" or "base64"), "body"}``;
``body`` is text when the bytes are UTF-8, else base64. An unknown topic or
queue is an error (exit 2) naming it.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys

from tieredstore import sync
from tieredstore.errors import TieredStoreError
from tieredstore.store import Message, NoSuchQueue, OffsetOutOfRange, iso
from tieredstore.store import parse_time as store_time

from .common import (
    CliError,
    check_selected,
    nonnegative_int,
    offsets,
    progress,
    progress_enabled,
    read_only_store,
    timestamp_ms,
)

BATCH = 256
PROGRESS_FROM = 1000  # a bar only when reading at least this many messages


def parse_time(text: str) -> int:
    """An argparse type: milliseconds since the epoch, or an ISO 8601 time (UTC unless
    it says otherwise), read as the store reads a time (:func:`tieredstore.store.parse_time`)."""
    if text.isdigit():
        return timestamp_ms(text)
    try:
        ms = store_time(text) // 1000
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not milliseconds or an ISO 8601 time: {text!r}") from None
    if ms < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is before 1970-01-01T00:00:00Z")
    return ms


def as_json(message: Message) -> str:
    try:
        body, encoding = message.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(message.body).decode("ascii"), "base64"
    return json.dumps({
        "topic": message.topic, "queue": message.queue_id, "offset": message.offset,
        "timestamp": message.store_timestamp, "time": iso(message.store_timestamp),
        "keys": list(message.keys), "tags": message.tags,
        "properties": dict(message.properties), "encoding": encoding, "body": body,
    }, ensure_ascii=False)


def as_text(message: Message) -> str:
    # Backslashes escaped before the bytes that are not UTF-8 become \xNN: the
    # four characters \xff print as \\xff, the byte 0xff as \xff.
    body = bytes(message.body).replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")
    body = body.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f"{message.offset}\t{iso(message.store_timestamp)}\t{body}"


async def consume(args: argparse.Namespace) -> tuple[int, int, int]:
    """Print the messages asked for; returns (count, first offset, end offset)."""
    render = as_json if args.json else as_text
    async with await read_only_store(args) as store:
        try:
            queue = await store.queue(args.topic, args.queue)
        except NoSuchQueue:
            check_selected(await store.queues(), args.topic, args.queue)
            raise
        if args.from_time is not None:
            start = await queue.offset_for_time(args.from_time)
        else:
            start = queue.min_offset if args.from_offset is None else args.from_offset
        if not queue.min_offset <= start <= queue.max_offset:
            raise OffsetOutOfRange(f"offset {start} is outside the queue's offsets "
                                   f"{offsets(queue.min_offset, queue.max_offset)}",
                                   topic=args.topic, queue_id=args.queue)
        end = queue.max_offset if args.count is None else min(queue.max_offset,
                                                              start + args.count)
        offset = start
        enabled = progress_enabled(args) and end - start >= PROGRESS_FROM
        with progress(enabled, total=max(0, end - start), desc="consume") as bar:
            while offset < end:
                batch = await queue.get(offset, min(BATCH, end - offset))
                if not batch:
                    raise CliError(f"{args.topic}/{args.queue}: no message at offset "
                                   f"{offset}, within {offsets(start, end)}")
                bar.write("".join(render(m) + "\n" for m in batch))
                offset += len(batch)
                bar.update(len(batch))
        return offset - start, start, offset


HELP = "print messages of a queue (read-only)"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="the topic")
    parser.add_argument("--queue", type=nonnegative_int, required=True, metavar="ID",
                        help="the queue id (0, 1, ...)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from", dest="from_offset", type=nonnegative_int, metavar="OFFSET",
                       help="first offset (default: the queue's min offset)")
    start.add_argument("--from-time", type=parse_time, metavar="TIME",
                       help="the first message stored at or after TIME: ms since the epoch "
                            "or ISO 8601 (UTC unless an offset is given)")
    parser.add_argument("--count", type=nonnegative_int, metavar="N",
                        help="at most N messages (default: up to the max offset)")


def run(args: argparse.Namespace) -> int:
    try:
        count, start, end = sync.run(consume(args))
    except TieredStoreError:
        sys.stdout.flush()  # what was printed before the error stays printed
        raise
    if not args.quiet:
        print(f"consumed {count} messages of {args.topic}/{args.queue}, offsets "
              f"{offsets(start, end)}", file=sys.stderr)
    return 0
