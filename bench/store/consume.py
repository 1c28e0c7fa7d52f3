"""Consuming a queue through ``get``: a catch-up read, and the decode cost per message.

1. **Catch-up consume.** One queue holds ``size`` bytes of 16 KiB messages
   (written through ``AsyncMessageStore``, segments sealed and merged as the
   writer does). A fresh store (a read-only one: nothing cached, as a new
   process) reads it all back with ``get(max_count=256)``: consume-queue units
   and commit-log records, every CRC checked, every record decoded. Baselines
   from the same run, over the same commit-log objects (the bytes that carry
   the messages; the consume queue is extra work ``get`` does on top):
   ranged GETs of the same 4 MiB units with 8 in flight (aioboto3 on
   SeaweedFS, the store's ``get_object`` on local), each CRC32C-checked, and
   s3fs's readahead file (SeaweedFS).
2. **Decode per message.** The same read of 1 KiB messages on the local
   backend, against plain Python that decodes each record of the same bytes
   (its fixed fields, its CRC32C, its body) and, for reference, plain Python
   that only frames them: what decoding cannot do without.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from collections.abc import Callable, Coroutine
from typing import Any

from bench.common import (
    DEFAULTS,
    LOCAL,
    SEAWEEDFS,
    BenchEnv,
    KiB,
    MiB,
    Table,
    human,
    mb_per_s,
    median,
    start_clock,
)
from bench.segment.seq_read import RAW_CONCURRENCY, read_pipelined, read_raw_s3, read_s3fs
from tieredstore.checksum import crc32c
from tieredstore.objectstore import ByteRange, ForwardingObjectStore, ObjectInfo, ObjectStore
from tieredstore.store import AsyncMessageStore

TOPIC = "consume"
BATCH = 256
# Rounds of the catch-up readers per ``seq_repeats``: a run varies by 10% and
# more on the shared cores of the machine, so the median takes more of them.
CATCH_UP_ROUNDS = 2
# Bytes of messages in the queue, by benchmark size: (catch-up 16 KiB, decode 1 KiB).
VOLUMES = {"full": (128 * MiB, 64 * MiB), "quick": (32 * MiB, 16 * MiB),
           "tiny": (2 * MiB, 1 * MiB)}
_HEAD = struct.Struct(">III")
_BODY_LENGTH = struct.Struct(">I")
_BARE_BODY = 12 + 20 + 2 + 2 + 2  # head, fixed fields, no tags, no keys, no properties
# A record's fixed fields (docs/records.md): size, magic, CRC32C, offset, store time,
# flags, tags length, key count, property count, body length.
_FIELDS = struct.Struct(">IIIQqIHHHI")
_MAGIC = 0x54534D31


class _KeepOpen(ForwardingObjectStore):
    """The benchmark's store, which each message store it lends it to may not close."""

    async def close(self) -> None:
        return None


async def fill(store: ObjectStore, volume: int, message: int) -> int:
    """Append ``volume`` bytes of ``message``-byte messages to one queue; close."""
    config = DEFAULTS.replace(gc_interval=0)
    writer = await AsyncMessageStore.open(config, store=_KeepOpen(store))
    body = os.urandom(message)
    count = volume // message
    for i in range(count):
        await writer.append(TOPIC, 0, i.to_bytes(8, "big") + body[8:])
    await writer.flush()
    # A catch-up reader reads old data: in the log mode, moved into chunks by then.
    await writer.compact_log(time.time() + config.log_compact_age + 1)
    await writer.close()
    return count


async def commit_log_units(store: ObjectStore) -> list[tuple[ObjectInfo, int, int]]:
    """The commit log's data objects in order, as (object, offset, length) units of at
    most one chunk: what a reader of the bytes alone would GET."""
    infos = [i for i in await store.list_all("") if f"/{TOPIC}/0/commitlog/" in i.key
             and i.size and (i.key.endswith("/segment") or "/chunk-" in i.key)]
    units: list[tuple[ObjectInfo, int, int]] = []
    step = DEFAULTS.chunk_size
    for info in sorted(infos, key=lambda i: i.key):
        size = info.size
        if info.key.endswith("/segment"):  # its unit table and footer follow the data
            size = info.size - await _trailer_size(store, info)
        units.extend((info, at, min(step, size - at)) for at in range(0, size, step))
    return units


async def _trailer_size(store: ObjectStore, info: ObjectInfo) -> int:
    from tieredstore.segment.trailer import FOOTER_SIZE, decode_footer

    tail = await store.get(info.key, ByteRange(info.size - FOOTER_SIZE, FOOTER_SIZE))
    footer = decode_footer(tail, segment=info.key)
    return info.size - footer.data_size


async def consume(store: ObjectStore) -> tuple[float, int, int]:
    """Read the queue through a fresh read-only store: seconds, messages, bytes."""
    reader = await AsyncMessageStore.open_read_only(DEFAULTS, store=store)
    try:
        end = await reader.max_offset(TOPIC, 0)
        offset = count = nbytes = 0
        started = start_clock()
        while offset < end:
            got = await reader.get(TOPIC, 0, offset, max_count=BATCH)
            count += len(got)
            nbytes += sum(len(m.body) for m in got)
            offset = got[-1].offset + 1
        return time.perf_counter() - started, count, nbytes
    finally:
        await reader.close()


async def raw_gets(get: Callable[[str, int, int], Coroutine[Any, Any, bytes]],
                   units: list[tuple[ObjectInfo, int, int]]) -> float:
    """GET every unit with RAW_CONCURRENCY in flight, in order, CRC-checking each."""
    started = start_clock()
    await read_pipelined(get, [(i.key, o, n) for i, o, n in units], DEFAULTS.chunk_size,
                         RAW_CONCURRENCY)
    return time.perf_counter() - started


def frame_plain(datas: list[bytes]) -> int:
    """Frame every record of the commit-log bytes, check its CRC32C, copy its body.

    The records are the benchmark's own (no tags, keys or properties), so the
    body's length sits at a fixed place: what decoding cannot do without."""
    count = 0
    for data in datas:
        view = memoryview(data)
        at, end = 0, len(data)
        while at + _HEAD.size <= end:
            total, _magic, crc = _HEAD.unpack_from(view, at)
            if not total or at + total > end:
                break
            if crc32c(view[at + _HEAD.size : at + total]) != crc:
                raise ValueError(f"record at {at} fails its CRC32C")
            (n,) = _BODY_LENGTH.unpack_from(view, at + _BARE_BODY)
            bytes(view[at + _BARE_BODY + 4 : at + _BARE_BODY + 4 + n])
            count += 1
            at += total
    return count


def parse_plain(datas: list[bytes]) -> int:
    """Decode every record of the commit-log bytes: unpack its fixed fields, check
    its size and magic and that it holds a body alone, check its CRC32C, and keep
    (offset, store time, body), in batches of ``BATCH``: the least a decoder that
    returns messages does."""
    count = 0
    out: list[tuple[int, int, bytes]] = []
    for data in datas:
        view = memoryview(data)
        at, end = 0, len(data)
        while at + _FIELDS.size <= end:
            total, magic, crc, offset, ts, _flags, _tags, _keys, _props, n = \
                _FIELDS.unpack_from(view, at)
            if magic != _MAGIC or at + total > end or _FIELDS.size + n != total:
                break
            if crc32c(view[at + _HEAD.size : at + total]) != crc:
                raise ValueError(f"record at {at} fails its CRC32C")
            out.append((offset, ts, view[at + _FIELDS.size : at + total].tobytes()))
            if len(out) == BATCH:  # handed over in batches, as get returns them
                out = []
            count += 1
            at += total
    return count


async def run(env: BenchEnv) -> list[Table]:
    catch_up, per_message = VOLUMES[env.sizes.name]
    tables = [Table(
        f"Catch-up consume through get: {human(catch_up)} of 16 KiB messages, "
        f"get(max_count={BATCH}), fresh read-only store",
        ["backend", "reader", "MB/s", "messages/s", "vs raw", "notes"],
        goal="at least 0.9x raw parallel ranged GETs of the same objects, faster than s3fs",
    )]
    for backend in env.backends:
        store = await env.store(backend, "consume")
        try:
            await _catch_up(env, tables[0], backend, store, catch_up)
        finally:
            await store.close()
    tables[0].notes.append("MB/s counts the commit-log bytes (records); get also reads and "
                           "checks the consume queue, which the baselines do not")
    tables[0].notes.append(f"median of {_rounds(env)} "
                           "runs per reader, the readers taking turns in a rotating order")
    tables[0].notes.append("every timed run starts once the garbage collector has run (as timeit "
                           "does), so that no reader pays for the garbage of the one before")
    if LOCAL in env.backends:
        tables.append(await _decode_table(env, per_message))
    return tables


async def _catch_up(env: BenchEnv, table: Table, backend: str, store: ObjectStore,
                    volume: int) -> None:
    await fill(store, volume, 16 * KiB)
    units = await commit_log_units(store)
    size = sum(u[2] for u in units)

    async def local_get(key: str, offset: int, length: int) -> bytes:
        return await store.get(key, ByteRange(offset, length))

    messages = 0

    async def get() -> float:
        nonlocal messages
        seconds, messages, _ = await consume(store)
        return seconds

    readers: dict[str, Callable[[], Coroutine[Any, Any, float]]] = {"tieredstore get": get}
    if backend == SEAWEEDFS:
        readers["raw ranged GETs (aioboto3)"] = lambda: _raw_s3(env, store, units)
        readers["s3fs readahead"] = lambda: asyncio.to_thread(_s3fs, env, store, units)
    else:
        readers["raw ranged GETs (get_object)"] = lambda: raw_gets(local_get, units)
    runs: dict[str, list[float]] = {name: [] for name in readers}
    order = list(readers)
    for turn in range(_rounds(env)):
        # The readers take turns, in an order that rotates every round: none
        # always runs right after the same other one.
        for name in order[turn % len(order):] + order[:turn % len(order)]:
            runs[name].append(await readers[name]())
    raw = next(median(v) for k, v in runs.items() if k.startswith("raw"))
    for name, timings in runs.items():
        s = median(timings)
        table.add(backend, name, f"{mb_per_s(size, s):.0f}",
                  f"{messages / s:,.0f}" if name == "tieredstore get" else "-",
                  f"{raw / s:.2f}x", f"{len(units)} units of the commit log, {human(size)}")
    get_s = median(runs["tieredstore get"])
    if backend == SEAWEEDFS:
        table.verdict(raw / get_s >= 0.9 and get_s < median(runs["s3fs readahead"]),
                      f"{backend}: get at {raw / get_s:.2f}x raw, s3fs at "
                      f"{raw / median(runs['s3fs readahead']):.2f}x raw")


def _rounds(env: BenchEnv) -> int:
    """Rounds of the catch-up readers."""
    return CATCH_UP_ROUNDS * max(1, env.sizes.seq_repeats)


async def _raw_s3(env: BenchEnv, store: Any, units: list[tuple[ObjectInfo, int, int]]
                  ) -> float:
    """One window of RAW_CONCURRENCY GETs over every unit of every object."""
    run = await read_raw_s3(env, store, None, [(i.key, o, n) for i, o, n in units],
                            DEFAULTS.chunk_size)
    return run.seconds


def _s3fs(env: BenchEnv, store: Any, units: list[tuple[ObjectInfo, int, int]]) -> float:
    seconds = 0.0
    for key, pieces in _by_key(units).items():
        size = sum(p[1] for p in pieces)
        seconds += read_s3fs(env, store.bucket, key, size=size, request=1 * MiB,
                             block=DEFAULTS.chunk_size).seconds
    return seconds


def _by_key(units: list[tuple[ObjectInfo, int, int]]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for info, offset, length in units:
        out.setdefault(info.key, []).append((offset, length))
    return out


async def _decode_table(env: BenchEnv, volume: int) -> Table:
    table = Table(
        f"get of 1 KiB messages, local backend: {human(volume)}, get(max_count={BATCH})",
        ["backend", "reader", "messages/s", "vs plain Python decode"],
        goal="at least 0.5x plain Python that decodes the same records and checks their "
             "CRC32C",
    )
    store = await env.store(LOCAL, "decode")
    try:
        await fill(store, volume, 1 * KiB)
        units = await commit_log_units(store)
        # One buffer: records cross chunk boundaries (never segment ones, and the
        # segments of the commit log follow one another).
        datas = [b"".join([await store.get(i.key, ByteRange(o, n)) for i, o, n in units])]
        runs: dict[str, list[float]] = {"get": [], "parse": [], "frame": []}
        for _ in range(max(1, env.sizes.seq_repeats)):
            seconds, count, _ = await consume(store)
            runs["get"].append(count / seconds)
            for name, plain in (("parse", parse_plain), ("frame", frame_plain)):
                started = start_clock()
                decoded = plain(datas)
                runs[name].append(decoded / (time.perf_counter() - started))
                assert decoded == count, (name, decoded, count)
        get_rate, parse_rate, frame_rate = (median(runs[k]) for k in ("get", "parse", "frame"))
        table.add(LOCAL, "tieredstore get (units, records, all checks)", f"{get_rate:,.0f}",
                  f"{get_rate / parse_rate:.2f}x")
        table.add(LOCAL, "plain Python decode: fields, CRC32C, (offset, time, body)",
                  f"{parse_rate:,.0f}", "1.00x")
        table.add(LOCAL, "plain Python framing only: size, CRC32C, body", f"{frame_rate:,.0f}",
                  f"{frame_rate / parse_rate:.2f}x")
        table.verdict(get_rate / parse_rate >= 0.5,
                      f"get at {get_rate / parse_rate:.2f}x the plain decode "
                      f"({get_rate / frame_rate:.2f}x framing only)")
        table.notes.append("plain Python runs over the commit-log bytes already in memory; "
                           "get reads them from the store and checks consume-queue units too")
        table.notes.append("decode: one unpack of a record's fixed fields, its size and magic "
                           "checked, one CRC32C, (offset, time, body) handed over in batches "
                           f"of {BATCH}; framing only: the body's length read at the place "
                           "it has in these records, no fields")
    finally:
        await store.close()
    return table
