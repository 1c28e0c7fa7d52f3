"""Encryption at rest: what SSE-S3 costs (SeaweedFS), and what the store's own record
compression and encryption cost (every backend).

The same producer writes ``VOLUMES`` bytes of 16 KiB messages into 4 queues
through ``AsyncMessageStore`` (defaults, log compacted into chunks before
close), once with ``s3_sse = ""`` and once with ``"AES256"``, each on a bucket
of its own; a fresh read-only store then reads every queue back with
``get(max_count=256)``. SeaweedFS encrypts and decrypts on the server (it has
no KMS here: SSE-KMS is not measured). MB/s are of message bodies; requests
as the store counted them.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import random
import time

import zstandard
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bench.common import DEFAULTS, SEAWEEDFS, BenchEnv, KiB, MiB, Table, mb_per_s, median
from bench.store.consume import _KeepOpen
from tieredstore.objectstore import S3ObjectStore
from tieredstore.store import AsyncMessageStore

QUEUES = 4
MESSAGE = 16 * KiB
VOLUMES = {"full": 128 * MiB, "quick": 32 * MiB, "tiny": 1 * MiB}
REPEATS = {"full": 3, "quick": 1, "tiny": 1}


async def _one(env: BenchEnv, sse: str) -> tuple[float, float, int, int]:
    """Write then read back: seconds of each, PUT-class and GET requests."""
    plain = await env.store(SEAWEEDFS, f"sse-{sse.lower() or 'none'}")
    assert isinstance(plain, S3ObjectStore)
    settings = plain.settings
    await plain.close()
    store = S3ObjectStore(dataclasses.replace(settings, sse=sse))
    config = DEFAULTS.replace(gc_interval=0.0, s3_sse=sse)
    volume = VOLUMES[env.sizes.name]
    body = os.urandom(MESSAGE)
    per_queue = volume // QUEUES // MESSAGE
    try:
        writer = await AsyncMessageStore.open(config, store=_KeepOpen(store))
        started = time.perf_counter()
        for q in range(QUEUES):
            await writer.append_batch("sse", q, [body] * per_queue)
        await writer.flush()
        await writer.compact_log(time.time() + config.log_compact_age + 1)
        await writer.close()
        write_s = time.perf_counter() - started
        puts = sum(n for op, n in store.metrics.requests.items() if op != "get")
        store.metrics.reset()
        reader = await AsyncMessageStore.open_read_only(config, store=_KeepOpen(store))
        started = time.perf_counter()
        for q in range(QUEUES):
            offset = 0
            while offset < per_queue:
                offset = (await reader.get("sse", q, offset, max_count=256))[-1].offset + 1
        read_s = time.perf_counter() - started
        await reader.close()
        return write_s, read_s, puts, store.metrics.requests.get("get", 0)
    finally:
        await store.close()


async def run(env: BenchEnv) -> list[Table]:
    table = Table("Encryption: SSE-S3 on SeaweedFS, writes and catch-up reads through the store",
                  ["s3_sse", "write MB/s", "catch-up MB/s", "write requests", "GETs"],
                  goal="shown, not judged: what server-side encryption costs")
    if SEAWEEDFS not in env.backends or env.s3 is None:
        table.notes.append("not run: needs SeaweedFS")
        return [table, *await run_codec(env)]
    volume = VOLUMES[env.sizes.name] // QUEUES // MESSAGE * QUEUES * MESSAGE
    for sse in ("", "AES256"):
        runs = [await _one(env, sse) for _ in range(REPEATS[env.sizes.name])]
        write_s = median([r[0] for r in runs])
        read_s = median([r[1] for r in runs])
        table.add(sse or '"" (none)', f"{mb_per_s(volume, write_s):.0f}",
                  f"{mb_per_s(volume, read_s):.0f}", runs[0][2], runs[0][3])
    table.notes.append(f"{volume // MiB} MiB of {MESSAGE // KiB} KiB messages in {QUEUES} "
                       "queues; medians of the runs; SSE-KMS is not measured (no KMS here)")
    return [table, *await run_codec(env)]


# --- record compression and client-side encryption (tieredstore.store.formats.codec) -----------

CODEC_MESSAGE = 1 * KiB
CODEC_VOLUMES = {"full": 64 * MiB, "quick": 16 * MiB, "tiny": 1 * MiB}
CODEC_KEY = base64.b64encode(bytes(range(32))).decode()
CODECS: dict[str, dict[str, str]] = {
    "none": {},
    "zstd": {"compression": "zstd"},
    "aes-gcm": {"encryption": "aes-gcm", "encryption_key": CODEC_KEY},
    "zstd + aes-gcm": {"compression": "zstd", "encryption": "aes-gcm",
                       "encryption_key": CODEC_KEY},
}


def order_bodies(count: int) -> list[bytes]:
    """1 KiB JSON orders: the kind of message a broker carries (compressible)."""
    rng = random.Random(7)
    out = []
    for i in range(count):
        lines = [{"sku": f"SKU-{rng.randrange(10**6):06d}", "qty": rng.randrange(1, 9),
                  "price": round(rng.uniform(1, 500), 2)} for _ in range(8)]
        text = json.dumps({"order": i, "customer": f"c-{rng.randrange(10**5)}",
                           "status": rng.choice(["new", "paid", "shipped"]), "lines": lines})
        out.append(text.encode().ljust(CODEC_MESSAGE)[:CODEC_MESSAGE])
    return out


async def _codec_one(env: BenchEnv, backend: str, settings: dict[str, str],
                     bodies: list[bytes]) -> tuple[float, float, int]:
    """Write then read back one queue: seconds of each, commit-log bytes stored."""
    store = await env.store(backend, "codec")
    config = DEFAULTS.replace(gc_interval=0.0, **settings)
    try:
        writer = await AsyncMessageStore.open(config, store=_KeepOpen(store))
        started = time.perf_counter()
        for first in range(0, len(bodies), 1024):
            await writer.append_batch("codec", 0, bodies[first:first + 1024])
        await writer.flush()
        await writer.compact_log(time.time() + config.log_compact_age + 1)
        await writer.close()
        write_s = time.perf_counter() - started
        stored = sum(o.size for o in await store.list_all("") if "/commitlog/" in o.key)
        reader = await AsyncMessageStore.open_read_only(config, store=_KeepOpen(store))
        started = time.perf_counter()
        offset = 0
        while offset < len(bodies):
            offset = (await reader.get("codec", 0, offset, max_count=1024))[-1].offset + 1
        read_s = time.perf_counter() - started
        await reader.close()
        return write_s, read_s, stored
    finally:
        await store.close()


def _library_only(bodies: list[bytes]) -> tuple[float, float]:
    """Plain Python: zstd then AES-GCM of each body, and back (seconds)."""
    compressor, decompressor = zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor()
    cipher = AESGCM(base64.b64decode(CODEC_KEY))
    nonce = bytes(12)
    started = time.perf_counter()
    sealed = [cipher.encrypt(nonce, compressor.compress(b), None) for b in bodies]
    seal_s = time.perf_counter() - started
    started = time.perf_counter()
    for s in sealed:
        decompressor.decompress(cipher.decrypt(nonce, s, None))
    return seal_s, time.perf_counter() - started


async def run_codec(env: BenchEnv) -> list[Table]:
    table = Table("Encryption and compression: records sealed by the store, writes and "
                  "catch-up reads",
                  ["backend", "codec", "write MB/s", "catch-up MB/s", "stored / data"],
                  goal="shown, not judged: what compression and client-side encryption "
                       "cost")
    bodies = order_bodies(CODEC_VOLUMES[env.sizes.name] // CODEC_MESSAGE)
    volume = len(bodies) * CODEC_MESSAGE
    for backend in env.backends:
        for name, settings in CODECS.items():
            write_s, read_s, stored = await _codec_one(env, backend, settings, bodies)
            table.add(backend, name, f"{mb_per_s(volume, write_s):.0f}",
                      f"{mb_per_s(volume, read_s):.0f}", f"{stored / volume:.2f}")
    seal_s, open_s = _library_only(bodies)
    table.add("plain Python", "zstd + aes-gcm, library calls only",
              f"{mb_per_s(volume, seal_s):.0f}", f"{mb_per_s(volume, open_s):.0f}", "")
    table.notes.append(f"{volume // MiB} MiB of {CODEC_MESSAGE} B JSON messages in one queue, "
                       "append_batch of 1,024, defaults; stored / data: commit-log objects "
                       "over message bodies (record framing included)")
    return [table]
