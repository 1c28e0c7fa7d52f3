"""``tieredstore consume``: print messages of one queue.

A queue is ``(broker, topic, queue id)``: RocketMQ spreads a topic's queues
over the brokers of a cluster, and queue 0 of a topic on two brokers is two
queues (a Kafka partition is one of them; RocketMQ's ``MessageQueue`` names
its broker too). Without ``--broker`` the command reads the queue of the
broker that has it; when several brokers have a queue ``--queue``, it is an
error (exit 2) naming them, and ``--broker`` chooses one. ``--broker``
naming a broker without the queue is an error naming the brokers that have
it.

Read-only: the queue's metadata is read without claiming it and segments are
found by listing, so a broker writing the store is not disturbed. It sees
what is durable in the bucket (see :mod:`tieredstore.store.read.view`). Every
record is checked (CRC32C, offset) as ``get`` checks it.

Prints ``offset, store time, body`` a line (tabs between; in the body newlines,
tabs and backslashes escaped as ``\\n``, ``\\t``, ``\\\\``, and bytes that are not
UTF-8 as ``\\xNN``), and a summary on stderr (the broker, the offsets consumed,
``[first, end)``). ``--json``: one JSON object a line, ``{"broker", "topic", "queue",
"offset", "timestamp" (ms), "time" (ISO 8601), "keys" [...], "tags" (null:
none), "properties" {...}, "encoding" ("utf-8" or "base64"), "body"}``;
``body`` is text when the bytes are UTF-8, else base64. An unknown topic or
queue is an error (exit 2) naming it.

Damage in the bucket stops it, as it stops ``get``: the messages before it
are printed and the error names it (exit 2). ``--skip-damaged`` reads around
it (``get_around_damage``): each range of offsets it steps over is printed on
stderr with its reason, and with ``--json`` as a line ``{"broker", "topic", "queue",
"skipped": {"first_offset", "end_offset", "count", "segment", "reason"}}`` in
offset order among the messages; the exit status is then 1 if anything was
skipped.

``--follow`` goes on at the end: every ``--interval`` seconds (1 by default)
it looks for messages made durable since, and prints them as they come,
until SIGINT or SIGTERM (exit 0, or 1 if it skipped damage), or ``--count``
messages. A look that finds nothing new opens the queue read-only again: a
LIST of the broker's log (and a GET of each log object new since the last
look), a LIST and a GET of the queue's head, a LIST of the consume queue's
and of the commit log's open segment (and a HEAD of each that ends in a
fence entry): at most 7 requests, 25,200 an hour at the default interval.
Finding the queue's broker costs, before the first read, one paged LIST of
the cluster's metadata root and one LIST of the topic's heads per broker;
nothing with ``--broker`` naming one broker.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import enum
import json
import signal
import sys
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tieredstore import sync
from tieredstore.errors import TieredStoreError
from tieredstore.store import (
    AroundDamage,
    Message,
    NoSuchQueue,
    OffsetOutOfRange,
    ReadOnlyCluster,
    ReadOnlyMessageStore,
    Skipped,
    iso,
)
from tieredstore.store import parse_time as store_time

from ..common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    Progress,
    UnknownQueue,
    check_in_cluster,
    nonnegative_int,
    offsets,
    progress,
    progress_enabled,
    read_only_cluster,
    timestamp_ms,
)

T = TypeVar("T")

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


def as_json(message: Message, broker: str) -> str:
    """A message of ``broker`` as ``--json`` prints it (consume and query)."""
    try:
        body, encoding = message.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(message.body).decode("ascii"), "base64"
    return json.dumps({
        "broker": broker, "topic": message.topic, "queue": message.queue_id,
        "offset": message.offset,
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


@dataclass
class Consumed:
    """What a consume did: the broker read, messages printed, offsets ``[start,
    end)`` passed, and the messages skipped (``--skip-damaged``), in how many
    ranges."""

    broker: str
    start: int
    end: int
    count: int = 0
    skipped: int = 0
    ranges: int = 0


class Printer:
    """Messages to stdout, skipped ranges to stderr (and with ``--json`` to stdout
    too), in offset order; neighbouring ranges skipped for one reason are printed
    as one, once what follows them is known."""

    def __init__(self, args: argparse.Namespace, broker: str, bar: Progress,
                 done: Consumed) -> None:
        self.args = args
        self.broker = broker
        self.bar = bar
        self.done = done
        self._held: Skipped | None = None  # a range not printed yet: the next may join it

    def messages(self, batch: list[Message]) -> None:
        if not batch:
            return
        self._release()
        if self.args.json:
            text = "".join(as_json(m, self.broker) + "\n" for m in batch)
        else:
            text = "".join(as_text(m) + "\n" for m in batch)
        self.bar.write(text)
        self.bar.update(len(batch))
        self.done.count += len(batch)

    def around(self, got: AroundDamage) -> None:
        """A read around damage's messages and ranges skipped, in offset order."""
        messages = got.messages
        for step in got.skipped:
            before = [m for m in messages if m.offset < step.first_offset]
            self.messages(before)
            messages = messages[len(before):]
            self.skipped([step])
        self.messages(messages)

    def skipped(self, steps: list[Skipped]) -> None:
        for step in steps:
            held = self._held
            if held is not None and held.end_offset == step.first_offset and \
                    (held.reason, held.segment) == (step.reason, step.segment):
                self._held = Skipped(held.first_offset, step.end_offset, held.reason,
                                     held.segment)
            else:
                self._release()
                self._held = step
            self.bar.update(step.end_offset - step.first_offset)

    def _release(self) -> None:
        step, self._held = self._held, None
        if step is None:
            return
        args, count = self.args, step.end_offset - step.first_offset
        self.done.skipped += count
        self.done.ranges += 1
        print(f"tieredstore: {self.broker} {args.topic}/{args.queue}: skipped {step} ({count} "
              f"message{'' if count == 1 else 's'})", file=sys.stderr, flush=True)
        if args.json:
            self.bar.write(json.dumps({"broker": self.broker, "topic": args.topic,
                                       "queue": args.queue, "skipped": {
                "first_offset": step.first_offset, "end_offset": step.end_offset,
                "count": count, "segment": step.segment, "reason": step.reason}},
                ensure_ascii=False) + "\n")

    def close(self) -> None:
        self._release()
        sys.stdout.flush()


@contextlib.contextmanager
def stopped_by_signals(enabled: bool) -> Iterator[asyncio.Event]:
    """An event SIGINT and SIGTERM set (when ``enabled`` and the loop can take
    signal handlers: the main thread's); a second signal cancels the command."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    installed: list[signal.Signals] = []

    def stopping() -> None:
        if stop.is_set() and task is not None:
            task.cancel()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM) if enabled else ():
        try:
            loop.add_signal_handler(sig, stopping)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            continue
        installed.append(sig)
    try:
        yield stop
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


class Stop(enum.Enum):
    STOPPED = "stopped"  # a signal came first


async def unless_stopped(work: Awaitable[T], stop: asyncio.Event) -> T | Stop:
    """``work``'s result, unless ``stop`` is set first (``work`` is then cancelled)."""
    running = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not running.done():
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
    return Stop.STOPPED if running.cancelled() else running.result()


async def queue_broker(cluster: ReadOnlyCluster, topic: str, queue: int) -> str:
    """The broker whose queue ``topic``/``queue`` is read: the one ``--broker``
    names, else the one that has it (see the module's rules)."""
    if cluster.selected is not None and len(cluster.selected) == 1:
        return cluster.selected[0]
    holding = await cluster.holding(topic, queue)
    if len(holding) > 1:
        raise CliError(f"queue {topic}/{queue} is on brokers {', '.join(holding)}: a queue is "
                       f"(broker, topic, queue id); --broker names the one to read "
                       f"(e.g. --broker {holding[0]})")
    if holding:
        return holding[0]
    brokers = await cluster.brokers()
    if len(brokers) == 1:  # its bytes may be in the broker's log alone: the open finds it
        return brokers[0]
    await check_in_cluster(cluster, topic, queue)
    raise UnknownQueue(f"unknown queue {topic}/{queue}")  # listed since: gone again


async def consume(args: argparse.Namespace) -> Consumed:
    """Print the messages asked for (see the module's rules)."""
    async with await read_only_cluster(args) as cluster:
        broker = await queue_broker(cluster, args.topic, args.queue)
        store = cluster.broker(broker)
        try:
            queue = await store.queue(args.topic, args.queue)
        except NoSuchQueue:
            await check_in_cluster(cluster, args.topic, args.queue)
            raise
        if args.from_time is not None:
            start = await queue.offset_for_time(args.from_time)
        else:
            start = queue.min_offset if args.from_offset is None else args.from_offset
        if not queue.min_offset <= start <= queue.max_offset:
            raise OffsetOutOfRange(f"offset {start} is outside the queue's offsets "
                                   f"{offsets(queue.min_offset, queue.max_offset)}",
                                   topic=args.topic, queue_id=args.queue)
        end = start + args.count if args.count is not None else None
        if not args.follow:
            end = queue.max_offset if end is None else min(queue.max_offset, end)
        done = Consumed(broker, start, start)
        enabled = progress_enabled(args) and not args.follow and \
            end is not None and end - start >= PROGRESS_FROM
        total = None if end is None else max(0, end - start)
        with stopped_by_signals(args.follow) as stop, \
                progress(enabled, total=total, desc="consume") as bar:
            printer = Printer(args, broker, bar, done)
            try:
                await read_queue(store, printer, end, stop)
            finally:
                printer.close()
        return done


async def read_queue(store: ReadOnlyMessageStore, printer: Printer, end: int | None,
                     stop: asyncio.Event) -> None:
    """Read from where ``printer`` is up to ``end`` (None: on and on, ``--follow``);
    with ``--follow`` wait at the queue's end for more, until ``stop``."""
    args, done = printer.args, printer.done
    topic, queue = args.topic, args.queue
    while end is None or done.end < end:
        want = BATCH if end is None else min(BATCH, end - done.end)
        if args.skip_damaged:
            read: Awaitable[Any] = store.get_around_damage(topic, queue, done.end, want)
        else:
            read = store.get(topic, queue, done.end, want)
        got = await unless_stopped(read, stop)
        if got is Stop.STOPPED:
            return
        if isinstance(got, AroundDamage):
            printer.around(got)
            at = got.next_offset
        else:
            printer.messages(got)
            at = got[-1].offset + 1 if got else done.end
        if at > done.end:
            done.end = at
            if args.follow:
                sys.stdout.flush()  # a reader at the other end of a pipe sees it now
            continue
        if not args.follow:
            raise CliError(f"{topic}/{queue}: no message at offset {done.end}, within "
                           f"{offsets(done.start, end or done.end)}")
        printer.close()  # nothing new: what is held is printed before the wait
        if await unless_stopped(asyncio.sleep(args.interval), stop) is Stop.STOPPED:
            return


HELP = "print messages of a queue (read-only)"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="the topic")
    parser.add_argument("--queue", type=nonnegative_int, required=True, metavar="ID",
                        help="the queue id (0, 1, ...); of the broker that has it, or the "
                             "one --broker names when several do")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from", dest="from_offset", type=nonnegative_int, metavar="OFFSET",
                       help="first offset (default: the queue's min offset)")
    start.add_argument("--from-time", type=parse_time, metavar="TIME",
                       help="the first message stored at or after TIME: ms since the epoch "
                            "or ISO 8601 (UTC unless an offset is given)")
    parser.add_argument("--count", type=nonnegative_int, metavar="N",
                        help="at most N messages (default: up to the max offset; with "
                             "--follow, on and on)")
    parser.add_argument("--skip-damaged", action="store_true",
                        help="read around damage in the bucket: print each range of "
                             "offsets that cannot be read on stderr, with its reason, and "
                             "go on (exit status 1 if any)")
    parser.add_argument("--follow", "-f", action="store_true",
                        help="at the end, wait for new messages and print them as they "
                             "become durable, until Ctrl-C or SIGTERM (exit 0)")
    parser.add_argument("--interval", type=positive_seconds, default=1.0, metavar="SECONDS",
                        help="with --follow: how often to look for new messages (default 1)")


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0 seconds, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    if args.interval != 1.0 and not args.follow:
        raise CliError("--interval needs --follow")
    try:
        done = sync.run(consume(args))
    except TieredStoreError:
        sys.stdout.flush()  # what was printed before the error stays printed
        raise
    except asyncio.CancelledError:  # a second signal: stop at once
        sys.stdout.flush()
        raise KeyboardInterrupt from None
    if not args.quiet:
        skipped = (f"; skipped {done.skipped} unreadable in {done.ranges} range"
                   f"{'' if done.ranges == 1 else 's'}" if done.ranges else "")
        print(f"consumed {done.count} messages of {done.broker} {args.topic}/{args.queue}, "
              f"offsets {offsets(done.start, done.end)}{skipped}", file=sys.stderr)
    return EXIT_FAILED if done.skipped else EXIT_OK
