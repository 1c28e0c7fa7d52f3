"""``tieredstore table optimize|vacuum OUT``: keep an export table (the Delta Lake
table ``tieredstore spark export`` writes) in shape, with delta-rs; no Spark.

``optimize`` compacts the table's small files (many small runs or
micro-batches) into files of about ``--target-file-size`` (default 128MiB), in
one Delta commit: the rows, each queue's exported end and what readers see
stay the same, and an export running at once is not disturbed (its commit is
made again on the newer version). ``vacuum`` deletes the files no version
younger than ``--retention-hours`` (default 168, a week) needs: the files an
optimize replaced, and the files of runs killed before their commit. Files
younger than the retention are kept, so the retention must be longer than any
export run or micro-batch takes (and than any reader's query of an old
version); ``--dry-run`` lists and deletes nothing. A continuous export's
checkpoint in the table (``_tieredstore_checkpoint``) is left alone.

OUT is a local directory, ``file://`` URI or ``s3://bucket/path`` (credentials,
endpoint and region from the store's flags and configuration, or the
``--output-*`` flags, as for ``export``). Needs the ``spark`` extra
(``deltalake``).

``--json``: ``optimize``: ``{"table", "version", "files_added", "files_removed",
"metrics" (delta-rs's)}``; ``vacuum``: ``{"table", "dry_run", "files": [...]}``.
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import urlparse

from tieredstore.sizes import MiB

from ..common import EXIT_OK, EXIT_USAGE, print_json, resolve_config, size, spark_extra

HELP = "optimize or vacuum an export table (Delta Lake), without Spark"
RETENTION_HOURS = 168


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="table_command", required=True, metavar="ACTION")
    optimize = actions.add_parser("optimize", parents=[common],
                                  help="compact small files into files of about SIZE")
    optimize.add_argument("output", metavar="OUT", help="the table (as export's --output)")
    optimize.add_argument("--target-file-size", type=size(1024), default=128 * MiB,
                          metavar="SIZE", help="files of about SIZE (default 128MiB)")
    vacuum = actions.add_parser("vacuum", parents=[common],
                                help="delete files no version younger than the retention needs")
    vacuum.add_argument("output", metavar="OUT", help="the table (as export's --output)")
    for action in (optimize, vacuum):
        add_output_access(action)
    vacuum.add_argument("--retention-hours", type=int, default=RETENTION_HOURS, metavar="N",
                        help="keep what versions of the last N hours need, and every file "
                             f"younger (default {RETENTION_HOURS}; longer than any export "
                             "run takes)")
    vacuum.add_argument("--dry-run", action="store_true", help="list, delete nothing")


def run(args: argparse.Namespace) -> int:
    spark = spark_extra(f"tieredstore table {args.table_command}")
    if spark is None:
        return EXIT_USAGE
    config = table_config(args)
    table = output_settings(args)
    if args.table_command == "optimize":
        return show_optimize(args, spark.optimize_table(args.output, config,
                                                        args.target_file_size, table=table))
    uri, files = spark.vacuum_table(args.output, config, args.retention_hours,
                                    dry_run=args.dry_run, table=table)
    if args.json:
        print_json({"table": uri, "dry_run": args.dry_run, "files": files})
        return EXIT_OK
    for name in files:
        print(name)
    print(f"{len(files)} file(s) {'to delete' if args.dry_run else 'deleted'} in {uri}")
    return EXIT_OK


def add_output_access(parser: argparse.ArgumentParser) -> None:
    """``--output-config``, ``--output-endpoint``, ``--output-region``: the S3
    settings of a table that lives elsewhere than the store."""
    group = parser.add_argument_group(
        "a table elsewhere than the store (an s3:// OUT; default: the store's S3 settings)")
    group.add_argument("--output-config", metavar="TOML",
                       help="the table's S3 settings from this file's s3_endpoint_url, "
                            "s3_region, s3_addressing_style and credentials (empty: the "
                            "default chain, AWS_* variables or a profile)")
    group.add_argument("--output-endpoint", metavar="URL",
                       help="the table's S3-compatible server (over --output-config's)")
    group.add_argument("--output-region", metavar="NAME",
                       help="the table's bucket's region (over --output-config's)")


def output_settings(args: argparse.Namespace) -> dict[str, str] | None:
    """What the ``--output-*`` flags say of the table's S3 settings (None: nothing,
    the store's settings stand)."""
    settings: dict[str, str] = {}
    if args.output_config:
        from tieredstore.config import load_config
        from tieredstore.spark import TABLE_KEYS  # the spark extra, as the jobs need

        given = load_config(args.output_config, env={})  # the file's alone
        settings = {key: str(getattr(given, key)) for key in TABLE_KEYS}
    if args.output_endpoint:
        settings["s3_endpoint_url"] = args.output_endpoint
    if args.output_region:
        settings["s3_region"] = args.output_region
    return settings or None


def table_config(args: argparse.Namespace) -> Any:
    """The S3 settings for the table (from the store's flags, environment and
    file). The store itself is not opened, so an s3:// table needs no
    ``--bucket``: the table's bucket stands in for the store's."""
    parsed = urlparse(args.output)
    if parsed.scheme in ("s3", "s3a") and parsed.netloc:
        return resolve_config(args, s3_bucket=parsed.netloc)
    return resolve_config(args)


def show_optimize(args: argparse.Namespace, done: Any) -> int:
    added = done.metrics.get("numFilesAdded", 0)
    removed = done.metrics.get("numFilesRemoved", 0)
    if args.json:
        print_json({"table": done.table, "version": done.version, "files_added": added,
                    "files_removed": removed, "metrics": dict(done.metrics)})
        return EXIT_OK
    print(f"{done.table}: {removed} file(s) compacted into {added} (version {done.version})")
    return EXIT_OK
