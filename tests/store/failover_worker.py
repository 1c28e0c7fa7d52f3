"""A writer process for the two-process failover test (test_failover_processes.py).

Long-lived: it reads one JSON command a line on stdin and writes one JSON report
a line on stdout, so that one process serves many rounds without paying for its
imports again. Commands:

``{"cmd": "run", "round": n, "role": "A"|"B", "seed": s, "spec": {...},
"write_mode": "log"|"direct", "compression": "none"|"zstd", "idle": "open"|None}``
    open a fresh message store on ``spec`` (its own key prefix per round) with
    that write mode and codec, and write to it at random until stopped or fenced.
    ``"idle": "open"`` (A only): an earlier store of A, in the other write mode,
    first writes one message to each queue and closes; then A's store opens and
    goes idle at once (as after ``idle``), holding the queues and appending nothing.
``{"cmd": "idle"}``
    stop writing (appenders and flusher end; the store stays open), report ``idle``.
``{"cmd": "wake"}``
    after ``idle``: append one message, flush once, report ``woke``; then wait
    for ``stop``.
``{"cmd": "stop"}``
    stop writing, close the store (which flushes), report ``done``.
``{"cmd": "exit"}``
    leave.

Reports (``t`` is ``time.monotonic()``: CLOCK_MONOTONIC is one clock for
every process on Linux, so stamps compare across processes):

``["hello"]``                          ready for commands
``["open", t, [[topic, queue], ...]]`` the store's open returned
``["ready", t]``                       A only: every queue of the round exists
``["as", seq, qi, t]``                 an append of message ``seq`` to queue ``qi`` starts
``["a", seq, offset, t]``              ... and returned ``offset``
``["fs", fid, t, [seq, ...]]``         a flush starts; it covers these unacknowledged appends
``["f", fid, t, [[qi, offset, seq], ...]]``  ... returned: these are acknowledged
``["fenced", t, where, type, message]`` a fenced error: the writer stops writing
``["error", t, where, type, message]``  any other error: the writer stops writing
``["idle", t]``                        after ``idle``: no append starts from here on
``["woke", t]``                        after ``wake``: its append and flush are over
``["done", t, {...}]``                 the round is over (store closed or given up)

A flush with fid ``"close"`` is the flush that ``close()`` does.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
import time
import traceback
from typing import Any

from tests.servers import ACCESS_KEY, SECRET_KEY
from tests.store.conftest import KiB, small_config
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import SegmentFenced
from tieredstore.metadata import MetadataFenced
from tieredstore.store import AsyncMessageStore

FENCED = (SegmentFenced, MetadataFenced)
QUEUES = [("fo", 0), ("fo", 1), ("fo2", 0)]
CHUNK = 4 * KiB
MAX_MESSAGE = 12 * KiB


def config(spec: dict[str, Any], round_no: int, **overrides: Any) -> TieredStoreConfig:
    """The store of one round: small segments, the round's own key prefix."""
    base: dict[str, Any] = {
        "key_prefix": f"round-{round_no:04d}", "chunk_size": CHUNK,
        "commit_log_max_size": 24 * KiB, "consume_queue_max_size": 2 * KiB,
        "max_message_size": MAX_MESSAGE, "pool_bytes": 1024 * KiB,
    }
    if spec["backend"] == "local":
        base.update(backend="local", local_path=spec["root"], local_fsync=False)
    else:
        base.update(backend="s3", s3_bucket=spec["bucket"], s3_endpoint_url=spec["endpoint"],
                    s3_region="us-east-1", s3_addressing_style="path",
                    s3_access_key_id=ACCESS_KEY, s3_secret_access_key=SECRET_KEY)
    base.update(overrides)
    return small_config(**base)


def body(writer: str, round_no: int, qi: int, seq: int) -> bytes:
    """Message ``seq`` of ``writer``: its header names it, the rest follows from it."""
    head = f"{writer}|{round_no}|{qi}|{seq}|".encode()
    rng = random.Random(head)
    roll = rng.random()
    if roll < 0.15:
        size = rng.randint(CHUNK + 1, MAX_MESSAGE - 512)  # spans two or three chunks
    elif roll < 0.3:
        size = rng.randint(1500, CHUNK)
    else:
        size = rng.randint(len(head), 700)
    rest = max(0, size - len(head))
    if rng.random() < 0.5:  # a body zstd shrinks: a short pattern over and over
        return head + (rng.randbytes(rng.randint(1, 16)) * rest)[:rest]
    return head + rng.randbytes(rest)


def message_key(role: str, seq: int) -> str:
    """The key each message carries: its writer and number (the key index is
    checked against what the readback reads)."""
    return f"{role}-{seq}"


def parse(data: bytes) -> tuple[str, int, int, int] | None:
    """(writer, round, queue index, seq) if ``data`` is exactly such a message."""
    try:
        writer, round_no, qi, seq, _ = data[:64].split(b"|", 4)
        found = writer.decode(), int(round_no), int(qi), int(seq)
    except ValueError:
        return None
    return found if body(*found) == data else None


class Round:
    """One writer's round: open, write at random until stopped or fenced, close."""

    def __init__(self, command: dict[str, Any]) -> None:
        self.round = int(command["round"])
        self.role = str(command["role"])
        self.rng = random.Random(f"{command['seed']}/{self.role}")
        self.spec = command["spec"]
        self.write_mode = str(command.get("write_mode", "log"))
        self.compression = str(command.get("compression", "none"))
        self.idle_from_open = command.get("idle") == "open"
        self.stop = asyncio.Event()
        self.idle = asyncio.Event()  # the "idle" command came
        self.wake = asyncio.Event()  # the "wake" command came
        self.seq = 0
        self.appended: list[tuple[int, int, int]] = []  # (qi, offset, seq), in return order
        self.acked_upto = 0
        self.flushes = 0
        self.gave_up = False

    def halt(self, where: str, exc: BaseException) -> None:
        if not self.gave_up:
            kind = "fenced" if isinstance(exc, FENCED) else "error"
            text = str(exc) if kind == "fenced" else "".join(traceback.format_exception(exc))
            emit([kind, time.monotonic(), where, type(exc).__name__, text])
        self.gave_up = True
        self.stop.set()

    async def append(self, store: AsyncMessageStore, qi: int) -> None:
        seq = self.seq
        self.seq += 1
        topic, queue = QUEUES[qi]
        emit(["as", seq, qi, time.monotonic()])
        offset = await store.append(topic, queue, body(self.role, self.round, qi, seq),
                                    keys=[message_key(self.role, seq)])
        emit(["a", seq, offset, time.monotonic()])
        self.appended.append((qi, offset, seq))

    async def flush(self, store: AsyncMessageStore, fid: int | str) -> None:
        upto = len(self.appended)
        covered = [seq for _, _, seq in self.appended[self.acked_upto:upto]]
        emit(["fs", fid, time.monotonic(), covered])
        if fid == "close":
            await store.close()
        else:
            await store.flush()
        now = time.monotonic()
        acked = self.appended[self.acked_upto:upto] if upto > self.acked_upto else []
        self.acked_upto = max(self.acked_upto, upto)
        emit(["f", fid, now, [list(t) for t in acked]])

    async def appender(self, store: AsyncMessageStore, mean_pause: float, sync: bool) -> None:
        """Append at random; ``sync``: flush after each append, as a careful producer."""
        while not self.stop.is_set():
            try:
                await self.append(store, self.rng.randrange(len(QUEUES)))
            except Exception as exc:
                self.halt("append", exc)
                return
            if sync:
                self.flushes += 1
                try:
                    await self.flush(store, self.flushes)
                except Exception as exc:
                    self.halt("flush", exc)
                    return
            pause = self.rng.random()
            if pause < 0.02:  # the producer idles: a takeover may come meanwhile
                await asyncio.sleep(self.rng.uniform(0.03, 0.15))
            elif pause < 0.6:
                await asyncio.sleep(self.rng.expovariate(1 / mean_pause))
            elif pause < 0.9:
                await asyncio.sleep(0)
            # else: straight on, several appends in one go

    async def flusher(self, store: AsyncMessageStore, mean_pause: float) -> None:
        while not self.stop.is_set():
            try:
                await asyncio.wait_for(self.stop.wait(), self.rng.expovariate(1 / mean_pause))
                return
            except TimeoutError:
                pass
            self.flushes += 1
            try:
                await self.flush(store, self.flushes)
            except Exception as exc:
                self.halt("flush", exc)
                return

    async def run(self, stopped: asyncio.Event) -> dict[str, Any]:
        rng = self.rng
        overrides: dict[str, Any] = {
            "group_commit_interval": rng.choice([0.005, 0.02, 0.2]),
            "write_mode": self.write_mode, "compression": self.compression,
        }
        if self.idle_from_open:
            other = "direct" if self.write_mode == "log" else "log"
            await self.prelude({**overrides, "write_mode": other})
        cfg = config(self.spec, self.round, **overrides)
        store = await AsyncMessageStore.open(cfg, writer_id=f"{self.role}-{self.round}")
        emit(["open", time.monotonic(), [list(q) for q in store.queues()]])
        if self.idle_from_open:
            self.idle.set()  # it holds every queue and writes nothing until woken
            emit(["ready", time.monotonic()])
        elif self.role == "A":
            # Every queue exists before B may open: B's open claims them all.
            try:
                for qi in range(len(QUEUES)):
                    await self.append(store, qi)
            except Exception as exc:
                self.halt("append", exc)
            emit(["ready", time.monotonic()])
        mean_pause = rng.choice([0.0005, 0.002, 0.005])
        sync = rng.random() < 0.25
        tasks = [asyncio.ensure_future(self.appender(store, mean_pause, sync))
                 for _ in range(rng.randint(1, 3))]
        flush_pause = rng.choice([0.003, 0.01, 0.03, 0.08])
        tasks.append(asyncio.ensure_future(self.flusher(store, flush_pause)))
        await first_of(stopped, self.idle)
        self.stop.set()
        await asyncio.gather(*tasks)
        if self.idle.is_set() and not stopped.is_set():
            await self.idle_then_wake(store, stopped)
        await stopped.wait()
        if self.gave_up:
            try:
                await store.close()
            except Exception as exc:
                emit(["closed-after-error", time.monotonic(), type(exc).__name__])
        else:
            try:
                await self.flush(store, "close")
            except Exception as exc:
                self.halt("close", exc)
        return {"appends": self.seq, "flushes": self.flushes}


    async def prelude(self, overrides: dict[str, Any]) -> None:
        """An earlier store of this writer: one message to each queue, then closed."""
        cfg = config(self.spec, self.round, **overrides)
        store = await AsyncMessageStore.open(cfg, writer_id=f"{self.role}0-{self.round}")
        try:
            for qi in range(len(QUEUES)):
                await self.append(store, qi)
            await self.flush(store, "prelude")
        finally:
            await store.close()

    async def idle_then_wake(self, store: AsyncMessageStore, stopped: asyncio.Event) -> None:
        """Idle (no append) until woken, then append once and flush once: the
        store of an idle producer that a takeover overtook."""
        emit(["idle", time.monotonic()])
        await first_of(stopped, self.wake)
        if not self.wake.is_set() or self.gave_up:
            return
        try:
            await self.append(store, self.rng.randrange(len(QUEUES)))
        except Exception as exc:
            self.halt("append", exc)
        if not self.gave_up:
            self.flushes += 1
            try:
                await self.flush(store, "wake")
            except Exception as exc:
                self.halt("flush", exc)
        emit(["woke", time.monotonic()])


async def first_of(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def emit(report: list[Any]) -> None:
    sys.stdout.write(json.dumps(report, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def main() -> None:
    loop = asyncio.get_running_loop()
    commands: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip():
                loop.call_soon_threadsafe(commands.put_nowait, json.loads(line))
        loop.call_soon_threadsafe(commands.put_nowait, {"cmd": "exit"})

    threading.Thread(target=read_stdin, daemon=True).start()
    emit(["hello"])
    current: asyncio.Task[dict[str, Any]] | None = None
    playing: Round | None = None
    stopped = asyncio.Event()
    while True:
        command = await commands.get()
        if command["cmd"] == "run":
            assert current is None, "one round at a time"
            stopped = asyncio.Event()
            playing = Round(command)
            current = asyncio.ensure_future(playing.run(stopped))
            current.add_done_callback(_report_done)
        elif command["cmd"] in ("idle", "wake"):
            assert playing is not None, f"{command['cmd']} outside a round"
            (playing.idle if command["cmd"] == "idle" else playing.wake).set()
        elif command["cmd"] == "stop":
            stopped.set()
            if current is not None:
                await asyncio.wait([current])
                current = None
        elif command["cmd"] == "exit":
            stopped.set()
            if current is not None:
                await asyncio.wait([current])
            return


def _report_done(task: asyncio.Task[dict[str, Any]]) -> None:
    if task.cancelled():
        emit(["done", time.monotonic(), {"cancelled": True}])
    elif task.exception() is not None:
        exc = task.exception()
        assert exc is not None
        emit(["error", time.monotonic(), "round", type(exc).__name__,
              "".join(traceback.format_exception(exc))])
        emit(["done", time.monotonic(), {}])
    else:
        emit(["done", time.monotonic(), task.result()])


if __name__ == "__main__":
    asyncio.run(main())
