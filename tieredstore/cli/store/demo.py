"""``tieredstore demo``: the message store end to end, on a fresh local store.

Produces a few thousand messages (keys, tags, properties, bodies from a few
bytes to 64 KiB) to several topics and queues with small segments, so that
commit logs and consume queues roll, seal and merge; flushes and closes;
reopens (recovery from the bucket alone); consumes every message and
compares each byte with what was produced; runs ``verify``; prints a summary
table and the object-store requests of each phase. Exits 1 if anything
differs. The local store's directory is new, empty, or one an earlier demo
made (it holds ``.tieredstore-demo``), which it clears: it refuses any other.
``--backend local`` (the default, whatever the configuration says):
``--data-dir`` (default ``demo-data``); ``--backend s3``: the bucket the flags
or the configuration name, under a fresh key prefix; ``--backend memory``: in
this process only.

``--json``: ``{"ok", "messages", "location", "queues": [{"topic", "queue",
"min_offset", "max_offset" (offsets [min, max)), "segments", "bytes",
"checked", "result"}], "requests": {phase: {operation: count}}, "problems":
[...]}``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tieredstore import sync
from tieredstore.config import TieredStoreConfig, human_size
from tieredstore.sizes import KiB
from tieredstore.store import (
    AsyncMessageStore,
    Message,
    ObjectStore,
    VerifyReport,
    open_object_store,
    verify_store,
)

from ..common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    format_requests,
    location_overrides,
    positive_int,
    print_json,
    progress,
    progress_enabled,
    resolve_config,
    table,
)

QUEUES: dict[str, int] = {"demo-orders": 3, "demo-clicks": 2, "demo-audit": 1}
TAGS = ("created", "paid", "shipped", None)
# Small segments, so that a few MiB roll, seal and merge many times.
DEMO_SIZES: dict[str, int] = {
    "commit_log_max_size": 512 * KiB,
    "consume_queue_max_size": 8 * KiB,
    "chunk_size": 64 * KiB,
    "max_message_size": 128 * KiB,  # its largest message, 64 KiB, fits; a segment holds 4
}
BATCH = 256
DEMO_MARKER = ".tieredstore-demo"  # in a --data-dir the demo created: it may clear it


@dataclass(frozen=True, slots=True)
class Produced:
    body: bytes
    keys: tuple[str, ...]
    tags: str | None
    properties: Mapping[str, str]


@dataclass
class QueueResult:
    expected: list[Produced] = field(default_factory=list)
    checked: int = 0
    differences: list[str] = field(default_factory=list)
    min_offset: int = -1
    max_offset: int = -1


def _message(rng: random.Random, i: int) -> Produced:
    kind = rng.random()
    if kind < 0.70:
        text = f'{{"order": {i}, "item": "{rng.choice(["tea", "rice", "pens", "bread"])}", '
        body = (text + '"note": "' + "x" * rng.randint(0, 400) + '"}').encode()
    elif kind < 0.95:
        body = rng.randbytes(rng.randint(1 * KiB, 4 * KiB))
    else:
        body = rng.randbytes(rng.randint(16 * KiB, 64 * KiB))
    keys = (f"order-{i}",) if i % 3 else (f"order-{i}", f"customer-{i % 97}")
    properties = {"seq": str(i), "source": "demo"}
    if i % 7 == 0:
        properties["region"] = "zürich"
    return Produced(body, keys, rng.choice(TAGS), properties)


def _compare(message: Message, offset: int, want: Produced) -> str:
    """What differs between a message read back and the one produced, or ''."""
    fields = (("offset", message.offset, offset), ("body", message.body, want.body),
              ("keys", message.keys, want.keys), ("tags", message.tags, want.tags),
              ("properties", dict(message.properties), dict(want.properties)))
    wrong = [name for name, got, expected in fields if got != expected]
    return f"offset {offset}: {', '.join(wrong)} differ" if wrong else ""


def _delta(before: dict[str, int], after: Mapping[str, int | float]) -> dict[str, int]:
    return {op: int(n) - before.get(op, 0) for op, n in after.items()
            if int(n) - before.get(op, 0)}


class Demo:
    def __init__(self, config: TieredStoreConfig, *, messages: int, seed: int,
                 show_progress: bool, shared: ObjectStore | None) -> None:
        self.config = config
        self.count = messages
        self.seed = seed
        self.show_progress = show_progress
        self.shared = shared  # the memory backend: one store object for every phase
        self.queues = {(t, q): QueueResult() for t, n in QUEUES.items() for q in range(n)}
        self.phases: list[tuple[str, dict[str, int]]] = []
        self.corrupt: dict[tuple[str, int], str] = {}

    async def _open(self) -> AsyncMessageStore:
        return await AsyncMessageStore.open(self.config, store=self.shared)

    async def _closed(self, store: AsyncMessageStore, phase: str) -> None:
        await store.close()
        self.phases.append((phase, _delta({}, store.snapshot()["requests"]["requests"])))

    async def produce(self) -> int:
        rng = random.Random(self.seed)
        names = sorted(self.queues)
        produced = 0
        store = await self._open()
        try:
            with progress(self.show_progress, total=self.count, desc="produce") as bar:
                for i in range(self.count):
                    topic, queue_id = rng.choice(names)
                    want = _message(rng, i)
                    result = self.queues[(topic, queue_id)]
                    offset = await store.append(topic, queue_id, want.body, keys=want.keys,
                                                tags=want.tags, properties=want.properties)
                    if offset != len(result.expected):
                        result.differences.append(f"append returned offset {offset}, "
                                                  f"expected {len(result.expected)}")
                    result.expected.append(want)
                    produced += len(want.body)
                    bar.update()
            await store.flush()
        finally:
            await self._closed(store, "produce, flush, close")
        # A short run may leave a queue without a message: it does not exist.
        self.queues = {key: result for key, result in self.queues.items() if result.expected}
        return produced

    async def reopen_and_consume(self) -> float:
        started = time.perf_counter()
        store = await self._open()
        recovered = time.perf_counter() - started
        try:
            self.corrupt = {k: str(e) for k, e in store.corrupt.items()}
            for key in sorted(set(store.queues()) - set(self.queues)):
                self.corrupt.setdefault(key, "a queue the demo did not produce to")
            with progress(self.show_progress, total=self.count, desc="consume") as bar:
                for (topic, queue_id), result in self.queues.items():
                    if (topic, queue_id) in self.corrupt:
                        continue
                    result.min_offset = await store.min_offset(topic, queue_id)
                    result.max_offset = await store.max_offset(topic, queue_id)
                    if (result.min_offset, result.max_offset) != (0, len(result.expected)):
                        result.differences.append(
                            f"offsets [{result.min_offset}, {result.max_offset}) after "
                            f"recovery, expected [0, {len(result.expected)})")
                    offset = result.min_offset
                    while offset < result.max_offset:
                        batch = await store.get(topic, queue_id, offset, BATCH)
                        if not batch:
                            result.differences.append(f"get at {offset} returned nothing")
                            break
                        for message in batch:
                            if message.offset < len(result.expected):
                                diff = _compare(message, offset, result.expected[offset])
                                if diff:
                                    result.differences.append(diff)
                            result.checked += 1
                            offset += 1
                        bar.update(len(batch))
        finally:
            await self._closed(store, "reopen (recovery), consume")
        return recovered

    async def verify(self) -> VerifyReport:
        store = self.shared or open_object_store(self.config)
        before = dict(store.metrics.snapshot()["requests"])
        try:
            with progress(self.show_progress, desc="verify", unit="B") as bar:
                report = await verify_store(store, self.config, on_bytes=bar.update)
        finally:
            if self.shared is None:
                await store.close()
        self.phases.append(("verify (read-only)", _delta(
            {k: int(v) for k, v in before.items()}, report.requests["requests"])))
        return report

    def summary(self, report: VerifyReport) -> list[list[Any]]:
        """A row per queue: topic, queue, min, max, segments and bytes (None: not
        verified), messages checked, result."""
        verified = {(c.topic, c.queue_id): c for c in report.queues}
        rows: list[list[Any]] = []
        for (topic, queue_id), result in self.queues.items():
            check = verified.get((topic, queue_id))
            problems = len(result.differences) + (check.error_count if check else 1)
            if (topic, queue_id) in self.corrupt:
                outcome = "CORRUPT"
            else:
                outcome = "ok" if not problems else f"{problems} DIFFER"
            rows.append([topic, queue_id, result.min_offset, result.max_offset,
                         check.segments if check else None, check.bytes if check else None,
                         result.checked, outcome])
        return rows


SUMMARY = ["topic", "queue", "min", "max", "segments", "bytes", "checked", "result"]


async def run_demo(config: TieredStoreConfig, *, messages: int, seed: int,
                   show_progress: bool, say: Callable[[str], None] = print
                   ) -> dict[str, Any]:
    """Run the demo on ``config``'s backend (which must be fresh), telling ``say``
    how it goes; the ``--json`` document (``"ok"``: True if all matched)."""
    shared = open_object_store(config) if config.backend == "memory" else None
    demo = Demo(config, messages=messages, seed=seed, show_progress=show_progress,
                shared=shared)
    where = {"local": f"local directory {config.local_path!r}",
             "s3": f"s3://{config.s3_bucket}/{config.key_prefix}",
             "memory": "memory"}[config.backend]
    say(f"tieredstore demo: {messages} messages to {len(demo.queues)} queues of "
          f"{len(QUEUES)} topics on {where}")
    say("  " + ", ".join(f"{k} {human_size(getattr(config, k), exact=False)}"
                           for k in DEMO_SIZES))
    started = time.perf_counter()
    produced = await demo.produce()
    took = time.perf_counter() - started
    say(f"produced {messages} messages ({human_size(produced, exact=False)} of bodies) "
          f"in {took:.2f}s, flushed, closed")
    started = time.perf_counter()
    recovered = await demo.reopen_and_consume()
    differences = sum(len(r.differences) for r in demo.queues.values())
    checked = sum(r.checked for r in demo.queues.values())
    say(f"reopened in {recovered:.2f}s: {len(demo.queues) - len(demo.corrupt)} queues "
          f"recovered, {len(demo.corrupt)} corrupt")
    say(f"consumed {checked} messages and compared every byte in "
          f"{time.perf_counter() - started - recovered:.2f}s: {differences} differences")
    started = time.perf_counter()
    report = await demo.verify()
    say(f"verify: {report.messages} messages, "
          f"{sum(c.units for c in report.queues)} units CRC-checked, "
          f"{report.error_count} errors in {time.perf_counter() - started:.2f}s")
    say("")
    rows = demo.summary(report)
    say(table([[*r[:5], None if r[5] is None else human_size(r[5], exact=False), *r[6:]]
               for r in rows], SUMMARY))
    say("")
    say("object-store requests (what an S3 bucket would be sent):")
    width = max(len(name) for name, _ in demo.phases)
    for name, requests in demo.phases:
        say(f"  {name.ljust(width)}  {format_requests({'requests': dict(requests)})}")
    problems = [f"{t}/{q}: {why}" for (t, q), why in demo.corrupt.items()]
    problems += [f"{t}/{q}: {d}" for (t, q), r in demo.queues.items() for d in r.differences]
    problems += [e for c in report.queues for e in c.errors]
    if checked != messages:
        problems.append(f"{checked} messages read back, {messages} produced")
    for line in problems[:20]:
        say(f"  PROBLEM {line}")
    say("demo: OK" if not problems else f"demo: FAILED ({len(problems)} problems)")
    return {"ok": not problems, "messages": messages, "location": where,
            "queues": [{"topic": r[0], "queue": r[1], "min_offset": r[2], "max_offset": r[3],
                        "segments": r[4], "bytes": r[5], "checked": r[6], "result": r[7]}
                       for r in rows],
            "requests": {name: dict(requests) for name, requests in demo.phases},
            "problems": problems}


HELP = ("produce, seal, restart, recover, consume and verify on a fresh store; exit 1 on "
        "any difference")


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=positive_int, default=4800, metavar="N",
                        help="messages to produce (default 4800)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")


def take_demo_dir(data_dir: str) -> None:
    """Make ``data_dir`` an empty directory of the demo's own: create it, take an
    empty one, or clear one an earlier demo made. Such a directory holds
    :data:`DEMO_MARKER`, written before anything else and kept while the rest
    is cleared, so one a demo died in is cleared too. Anything else is refused
    with :class:`CliError`, untouched: the demo deletes only what it created."""
    where = Path(data_dir)
    marker = where / DEMO_MARKER
    if where.exists() and not where.is_dir():
        raise CliError(f"--data-dir {data_dir!r} ({where.absolute()}) is not a directory")
    if where.is_dir() and not marker.is_file() and any(where.iterdir()):
        raise CliError(f"--data-dir {data_dir!r} ({where.absolute()}) is not empty and is not "
                       f"a demo directory (no {DEMO_MARKER} in it): the demo clears only a "
                       "directory it created; give a new or an empty directory")
    where.mkdir(parents=True, exist_ok=True)
    marker.write_text("Made by `tieredstore demo`, which clears this directory on its next run.\n")
    for child in where.iterdir():
        if child.name == DEMO_MARKER:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def run(args: argparse.Namespace) -> int:
    backend = location_overrides(args).get("backend", "local")
    if backend == "local":
        data_dir = args.local_path or "demo-data"
        take_demo_dir(data_dir)
        config = resolve_config(args, backend=backend, local_path=data_dir, **DEMO_SIZES)
    else:
        config = resolve_config(args, backend=backend, **DEMO_SIZES)
        if backend == "s3":
            prefix = f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{random.randrange(16**6):06x}"
            config = config.replace(key_prefix="/".join(p for p in (config.key_prefix, prefix)
                                                        if p))
    done = sync.run(run_demo(config, messages=args.messages, seed=args.seed,
                             show_progress=progress_enabled(args),
                             say=(lambda _: None) if args.json else print))
    if args.json:
        print_json(done)
    return EXIT_OK if done["ok"] else EXIT_FAILED
