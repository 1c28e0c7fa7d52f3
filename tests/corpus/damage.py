"""A corpus of deliberately damaged stores: each case builds a store and breaks
it one way, through the bucket alone, as a disk, a bug or an operator would.

Used by the tests of every checker (the CLI's ``verify``, the Spark verify
job): on each case they must name the same damaged offsets.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from tests.spark.conftest import BuiltStore, build_store
from tieredstore.checksum import crc32c, format_crc
from tieredstore.filetype import FileType
from tieredstore.log.index import read_index
from tieredstore.objectstore import LocalObjectStore, ObjectStore
from tieredstore.objectstore.reads import CRC_METADATA_KEY

TOPIC = "d"


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    damage: Callable[[ObjectStore, BuiltStore], Awaitable[None]]
    merged: bool = True
    # "direct": the active segments' bytes in chunks, which the damage needs.
    write_mode: str = "log"


async def keys_of(store: ObjectStore, file_type: str, *, chunks: bool) -> list[str]:
    """Data objects of queue d/0 of ``file_type``: chunks, or merged segments."""
    infos = await store.list_all("")
    return sorted(i.key for i in infos if f"/{TOPIC}/0/{file_type}/" in i.key and i.size
                  and (("/chunk-" in i.key) if chunks else i.key.endswith("/segment")))


async def rewrite(store: ObjectStore, key: str, change: Callable[[bytearray], None], *,
                  fix_crc: bool) -> None:
    got = await store.get_object(key)
    data = bytearray(got.data)
    change(data)
    metadata = dict(got.info.metadata)
    if fix_crc:
        metadata[CRC_METADATA_KEY] = format_crc(crc32c(bytes(data)))
    await store.put(key, bytes(data), metadata=metadata)


def flip(at: int) -> Callable[[bytearray], None]:
    def change(data: bytearray) -> None:
        data[at] ^= 0x01
    return change


async def flip_merged_commit_log(store: ObjectStore, built: BuiltStore) -> None:
    await rewrite(store, (await keys_of(store, "commitlog", chunks=False))[1], flip(5000),
                  fix_crc=False)


async def flip_merged_consume_queue(store: ObjectStore, built: BuiltStore) -> None:
    await rewrite(store, (await keys_of(store, "consumequeue", chunks=False))[1], flip(100),
                  fix_crc=False)


async def flip_active_consume_queue(store: ObjectStore, built: BuiltStore) -> None:
    await rewrite(store, (await keys_of(store, "consumequeue", chunks=True))[-1], flip(40),
                  fix_crc=False)


async def flip_consume_queue_in_the_log(store: ObjectStore, built: BuiltStore) -> None:
    """One byte of the newest consume-queue piece of d/0 in a log object (write mode
    log): past its segment's chunks, live."""
    for info in sorted(await store.list_all(""), key=lambda i: i.key, reverse=True):
        if "/log/log-" not in info.key or not info.size:
            continue
        for piece in await read_index(store, info.key, info.size):
            if (piece.topic, piece.queue_id, piece.file_type) == (TOPIC, 0,
                                                                  FileType.CONSUME_QUEUE):
                await rewrite(store, info.key, flip(piece.object_offset + 40), fix_crc=False)
                return
    raise AssertionError("no consume-queue piece of d/0 in the log")


async def flip_one_record(store: ObjectStore, built: BuiltStore) -> None:
    """One record's bytes changed, its chunk's CRC made to match: only the record's
    own CRC can tell."""
    await rewrite(store, (await keys_of(store, "commitlog", chunks=True))[1], flip(100),
                  fix_crc=True)


async def delete_active_commit_log_chunk(store: ObjectStore, built: BuiltStore) -> None:
    chunks = await keys_of(store, "commitlog", chunks=True)
    active = chunks[-1].rsplit("/", 1)[0]
    await store.delete(next(c for c in chunks if c.startswith(active + "/")))


async def wrong_tags_hash(store: ObjectStore, built: BuiltStore) -> None:
    """A consume-queue unit whose tags hash is not its record's, its CRCs made to
    match: only the check of record against unit can tell."""
    key = (await keys_of(store, "consumequeue", chunks=True))[-1]

    def change(data: bytearray) -> None:
        unit = 3 * 32  # the fourth unit: position 8 bytes, size 4, tags hash 8, time 8, CRC 4
        (tags,) = struct.unpack_from(">q", data, unit + 12)
        struct.pack_into(">q", data, unit + 12, tags ^ 0x5A5A)
        struct.pack_into(">I", data, unit + 28, crc32c(bytes(data[unit:unit + 28])))

    await rewrite(store, key, change, fix_crc=True)


CASES = [
    Case("intact", lambda store, built: asyncio.sleep(0)),
    Case("flipped byte, merged commit log", flip_merged_commit_log),
    Case("flipped byte, merged consume queue", flip_merged_consume_queue),
    Case("flipped byte, active consume queue", flip_active_consume_queue, write_mode="direct"),
    Case("flipped byte, consume queue in the log", flip_consume_queue_in_the_log),
    Case("one record's own CRC", flip_one_record, merged=False),
    Case("chunk missing, active commit log", delete_active_commit_log_chunk),
    Case("tags hash of a unit", wrong_tags_hash, write_mode="direct"),
]


def build_case(case: Case, path: Path) -> BuiltStore:
    built = build_store(path, queues=((TOPIC, 0), (TOPIC, 1)), per_queue=220,
                        merge_on_seal=case.merged, write_mode=case.write_mode)

    async def damage() -> None:
        store = LocalObjectStore(built.path, fsync=False)
        try:
            await case.damage(store, built)
        finally:
            await store.close()

    asyncio.run(damage())
    return built
