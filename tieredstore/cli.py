"""The ``tieredstore`` command."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import TieredStoreError
from tieredstore.objectstore import open_object_store
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath

MiB = 1024 * 1024


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


async def _demo(config: TieredStoreConfig) -> None:
    """Write, seal, reopen and read back a few segments on the configured backend."""
    store = open_object_store(config)
    options = SegmentOptions(chunk_size=config.chunk_size)
    rng = random.Random(7)
    written: dict[SegmentPath, bytes] = {}
    print(f"backend: {config.backend} ({config.local_path if config.backend == 'local' else ''})")
    started = time.perf_counter()
    for queue in range(3):
        path = SegmentPath(config.cluster, config.broker, "demo-topic", queue,
                           FileType.COMMIT_LOG, 0, prefix=config.key_prefix)
        segment = await ChunkedSegment.open(store, path, options=options)
        if segment.sealed:
            await segment.destroy()
            segment = await ChunkedSegment.open(store, path, options=options)
        data = rng.randbytes(rng.randint(3 * MiB, 9 * MiB))
        for offset in range(0, len(data), MiB):
            await segment.commit0(offset, data[offset : offset + MiB])
        await segment.seal()
        written[path] = data
    print(f"wrote and sealed {len(written)} segments in {time.perf_counter() - started:.2f}s")
    rows = []
    for path, data in written.items():
        reopened = await ChunkedSegment.open(store, path, options=options)
        back = await reopened.read0(0, reopened.commit_position)
        rows.append([str(path), str(len(data)), "merged" if reopened.merged else "chunks",
                     str(len(reopened.layout)), "ok" if back == data else "MISMATCH"])
    print(_table(rows, ["segment", "bytes", "state", "units", "read back"]))
    requests = store.metrics.snapshot()["requests"]
    print("requests:", ", ".join(f"{k} {v}" for k, v in sorted(requests.items())))
    await store.close()
    if any(r[-1] != "ok" for r in rows):
        raise SystemExit("demo: data read back differs from what was written")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tieredstore", description=__doc__)
    parser.add_argument("--config", help="TOML file (default: conf/tieredstore.toml if present)")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="write, seal, reopen and read back on the local backend")
    demo.add_argument("--data-dir", default="demo-data", help="where the local backend writes")
    args = parser.parse_args(argv)
    config_path = args.config or ("conf/tieredstore.toml"
                                  if os.path.exists("conf/tieredstore.toml") else None)
    try:
        if args.command == "demo":
            shutil.rmtree(args.data_dir, ignore_errors=True)
            config = load_config(config_path, local_path=args.data_dir)
            asyncio.run(_demo(config))
    except TieredStoreError as exc:
        print(f"tieredstore: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
