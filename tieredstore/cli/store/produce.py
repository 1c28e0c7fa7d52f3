"""``tieredstore produce``: append messages to one queue, then flush.

Bodies come from ``--count N --size B`` (generated), ``--file F`` (one message
per line) or standard input (one message per line; each line is appended as
it arrives, and is durable within ``group_commit_interval`` as any appended
message, while the input is still open: a pipe that streams for hours is
stored as it goes). Producing is writing:
opening the store recovers and claims its queues, which fences any other
writer of the same broker; so the topic, queue, keys, tags, properties and
timestamp every message shares are checked first, and a bad one is an error
(exit 2) that leaves the store untouched. Reading standard input on a
terminal, it says so on stderr first.

Prints one line: what was appended, offsets ``[first, end)``. ``--json``:
``{"topic", "queue", "count", "bytes", "first_offset", "end_offset",
"seconds"}`` (offsets null when nothing was produced; ``end_offset`` is
exclusive).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack

from tieredstore import sync
from tieredstore.config import human_size
from tieredstore.store import AsyncMessageStore, check_append

from ..common import (
    CliError,
    add_metrics_port,
    add_take_over,
    nonnegative_int,
    offsets,
    positive_int,
    print_json,
    progress,
    progress_enabled,
    resolve_config,
    size,
    timestamp_ms,
)
from .lines import lines

FILLER = b"abcdefghijklmnopqrstuvwxyz0123456789"


async def generated(count: int, size: int) -> AsyncIterator[bytes]:
    """``count`` bodies of exactly ``size`` bytes, each starting with its number."""
    for i in range(count):
        head = f"message {i} ".encode()
        body = head + FILLER * (size // len(FILLER) + 1)
        yield body[:size]


def parse_property(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


async def produce(args: argparse.Namespace, bodies: AsyncIterator[bytes], total: int | None
                  ) -> tuple[int, int, int, int]:
    """Append every body; returns (count, bytes, first offset, last offset)."""
    config = resolve_config(args)
    if args.count is not None and args.size > config.max_message_size:
        # Checked before a body is built: --size 99999999999 is an error, not a MemoryError.
        raise CliError(f"--size {args.size} is larger than max_message_size = "
                       f"{human_size(config.max_message_size, exact=False)}")
    properties = dict(args.property or ())
    # What every message shares is checked before the store is opened: opening
    # claims the queue, and a typo must not fence a live writer.
    check_append(args.topic, args.queue, b"", keys=tuple(args.key or ()), tags=args.tag,
                 properties=properties, timestamp=args.timestamp, offset=None, config=config,
                 topic_reserved_time={})
    count = size = 0
    first = last = -1
    async with await AsyncMessageStore.open(config, take_over=args.take_over) as store:
        with progress(progress_enabled(args), total=total, desc="produce") as bar:
            async for body in bodies:
                last = await store.append(args.topic, args.queue, body,
                                          keys=tuple(args.key or ()), tags=args.tag,
                                          properties=properties, timestamp=args.timestamp)
                if first < 0:
                    first = last
                count += 1
                size += len(body)
                bar.update()
        await store.flush()
    return count, size, first, last


HELP = "append messages to a queue"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    add_metrics_port(parser, "the writer's metrics (docs/metrics.md)")
    add_take_over(parser)
    parser.add_argument("--topic", required=True, help="the topic (created by its first message)")
    parser.add_argument("--queue", type=nonnegative_int, required=True, metavar="ID",
                        help="the queue id (0, 1, ...)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--count", type=positive_int, metavar="N",
                        help="generate N messages (of --size bytes)")
    source.add_argument("--file", metavar="PATH",
                        help="one message per line of PATH ('-': standard input, the "
                             "default without --count)")
    parser.add_argument("--size", type=size(), default=100, metavar="SIZE",
                        help="body size of generated messages: bytes, or with a unit "
                             "(512KiB, 1MiB; default 100)")
    parser.add_argument("--key", action="append", metavar="KEY",
                        help="a key of every message (repeatable)")
    parser.add_argument("--tag", help="the tags of every message")
    parser.add_argument("--property", action="append", type=parse_property,
                        metavar="NAME=VALUE", help="a property of every message (repeatable)")
    parser.add_argument("--timestamp", type=timestamp_ms, metavar="MS",
                        help="store timestamp of every message, ms since the epoch "
                             "(default: now; within timestamp_before_max and "
                             "timestamp_after_max of now)")


def run(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        total: int | None = None
        if args.count is not None:
            bodies = generated(args.count, args.size)
            total = args.count
        elif args.file in (None, "-"):
            if sys.stdin.isatty():
                print("tieredstore produce: reading messages from standard input, one a line; "
                      "end with Ctrl-D (or give --count N or --file PATH)", file=sys.stderr)
            bodies = lines(sys.stdin.buffer)
        else:
            try:
                stream = stack.enter_context(open(args.file, "rb"))
            except OSError as exc:
                raise CliError(f"cannot read {args.file!r}: {exc.strerror}") from None
            bodies = lines(stream)
        started = time.perf_counter()
        count, size, first, last = sync.run(produce(args, bodies, total))
    took = time.perf_counter() - started
    where = f"{args.topic}/{args.queue}"
    if args.json:
        print_json({"topic": args.topic, "queue": args.queue, "count": count, "bytes": size,
                    "first_offset": first if count else None,
                    "end_offset": last + 1 if count else None, "seconds": round(took, 3)})
    elif count:
        print(f"produced {count} messages ({human_size(size, exact=False)}) to {where}, offsets "
              f"{offsets(first, last + 1)}, in {took:.2f}s")
    else:
        print(f"produced nothing to {where}: no input")
    return 0
