"""``tieredstore spark export|verify|compact|stats``: the Spark jobs.

The arguments after ``spark`` go to the jobs (:mod:`tieredstore.spark.jobs`):
``--master`` first (default ``local[*]`` on loopback, or spark-submit's), then
the job and its options, ``tieredstore spark verify --help`` for each. The
store is named as for the jobs (``--path``, ``--backend s3 --bucket ...``,
``--option KEY=VALUE``); ``--config`` and ``--data-dir`` given before the job
name it too. Needs the ``spark`` extra (``pip install 'tieredstore[spark]'``).
"""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_USAGE

JOBS = ("export", "verify", "compact", "stats")


HELP = f"run a Spark job: {', '.join(JOBS)} (--master M)"


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
    job = next((i for i, a in enumerate(argv) if a in JOBS), None)
    if job is not None:
        named = [("--config", args.config), ("--path", args.data_dir)]
        argv[job + 1:job + 1] = [item for flag, value in named
                                 if value is not None and flag not in argv
                                 for item in (flag, str(value))]
    return run_job(argv, prog="tieredstore spark")
