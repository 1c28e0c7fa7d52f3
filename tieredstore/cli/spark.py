"""``tieredstore spark export|verify|compact|stats``: the Spark jobs; ``tieredstore
spark pack``: the environment for a cluster's workers, and the spark-submit line.

The arguments after ``spark`` go to the jobs (:mod:`tieredstore.spark.jobs`):
``--master`` first (default ``local[*]`` on loopback, or spark-submit's), then
the job and its options, ``tieredstore spark verify --help`` for each. The
store is named as for the jobs (``--path``, ``--backend s3 --bucket ...``,
``--option KEY=VALUE``); ``--config`` and ``--data-dir`` given before the job
name it too. A master that is not ``local`` gets this environment shipped to
its workers (:mod:`tieredstore.spark.shipping`), which need only Python and
Spark. ``tieredstore spark [--master M] pack [--cache-dir DIR]`` builds that
pack (cached) and prints the ``spark-submit`` line that runs the jobs (or your
own script) with it. Needs the ``spark`` extra (``pip install
'tieredstore[spark]'``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .common import EXIT_OK, EXIT_USAGE, Parser, describe_error

JOBS = ("export", "verify", "compact", "stats")
PACK = "pack"
MASTER_PLACEHOLDER = "spark://HOST:7077"


HELP = f"run a Spark job: {', '.join(JOBS)} (--master M); or {PACK} for a cluster"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.set_defaults(passthrough=True)


def run(args: argparse.Namespace) -> int:
    try:
        from tieredstore.spark import run_job
    except ImportError as exc:
        print(f"tieredstore: the Spark jobs need pyspark ({exc}); install the spark extra: "
              "pip install 'tieredstore[spark]'", file=sys.stderr)
        return EXIT_USAGE
    argv = list(getattr(args, "extra", []))
    job = next((i for i, a in enumerate(argv) if a in (*JOBS, PACK)), None)
    if job is not None and argv[job] == PACK:
        return run_pack(argv[:job] + argv[job + 1:])
    if job is not None:
        named = [("--config", args.config), ("--path", args.data_dir)]
        argv[job + 1:job + 1] = [item for flag, value in named
                                 if value is not None and flag not in argv
                                 for item in (flag, str(value))]
    return run_job(argv, prog="tieredstore spark")


def run_pack(argv: Sequence[str]) -> int:
    """Build (or find) the pack; print the spark-submit line on stdout, the
    archive and its size on stderr."""
    from tieredstore.spark import PackError, pack

    parser = Parser(prog=f"tieredstore spark {PACK}",
                    description="pack tieredstore and its dependencies for a cluster's "
                                "workers; print the spark-submit line that ships it")
    parser.add_argument("--master", default=MASTER_PLACEHOLDER,
                        help=f"the master to put in the line (default {MASTER_PLACEHOLDER})")
    parser.add_argument("--cache-dir", help="where packs are kept (default "
                        "$XDG_CACHE_HOME/tieredstore/spark or ~/.cache/tieredstore/spark)")
    args = parser.parse_args(list(argv))
    try:
        built = pack(args.cache_dir)
    except (PackError, OSError) as exc:
        print(f"tieredstore spark {PACK}: {describe_error(exc)}", file=sys.stderr)
        return EXIT_USAGE
    size = built.archive.stat().st_size
    print(f"{built.archive} ({size / 2**20:.0f} MiB); the workers run {built.python} "
          "from their PATH. Append a job and its options (stats --path DIR ...), or put "
          "your own script in place of the last word:", file=sys.stderr)
    print(built.submit_line(args.master))
    return EXIT_OK
