"""The ``tieredstore`` command: demo, produce, consume, query, inspect, recover, repair,
verify, gc, metrics, ledger, spark, table; and bench, in a source checkout (the benchmark
suite is not installed with the package).

Every command takes the same options for where the store is: ``--config
TOML`` (default ``conf/tieredstore.toml`` if it exists), ``--backend local|s3``,
``--data-dir DIR`` (local), ``--bucket``, ``--endpoint``, ``--region``,
``--create-bucket`` (S3: produce, demo and ledger append create the bucket
with it; the commands that read an existing store refuse it), ``--prefix``,
``--cluster``, ``--broker``. A flag
overrides ``TIEREDSTORE_<KEY>`` environment variables, which override the
file. A queue is (broker, topic, queue id): the reading commands (inspect,
verify, consume, query, metrics, gc) read every broker of the cluster, and
``--broker`` narrows them (``a`` or ``a,b``); the writing ones act on one
broker, ``--broker`` (else the configured ``broker``). S3 credentials are
never flags: they come from the configuration or boto3's own chain
(``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``, ``~/.aws``).

``--json`` prints JSON on stdout (one document; ``consume`` and ``query``
one object a line); each command's help gives its shape, and each row of the
reading commands names its ``broker``. Offset ranges are
written half-open, ``[first, end)``.

Exit codes: 0 success, 1 the command found something wrong (``demo``,
``verify``, ``recover``, ``repair``, the Spark jobs), 2 bad arguments, an
unknown topic or queue, or an error that stopped the command, printed as one
line ``tieredstore: <message>`` (``--debug`` prints the traceback too).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from tieredstore import __version__
from tieredstore.errors import ConfigError, TieredStoreError
from tieredstore.store import WriterLive

from . import bench, ledger
from .common import (
    EXIT_USAGE,
    CliError,
    Parser,
    add_common_options,
    describe_error,
    option_defaults,
)
from .spark import jobs as spark
from .spark import table
from .store import (
    consume,
    demo,
    gc,
    inspector,
    metrics,
    produce,
    query,
    recover,
    repair,
    verify,
)

__all__ = ["build_parser", "main"]

# Each command's module: its ``HELP`` line, ``add_arguments`` and ``run(args)``
# (the exit code); its docstring is the command's description.
COMMANDS = {"demo": demo, "produce": produce, "consume": consume, "query": query,
            "inspect": inspector, "recover": recover, "repair": repair, "verify": verify,
            "gc": gc, "ledger": ledger, "spark": spark, "table": table, "bench": bench,
            "metrics": metrics}


# The commands (and ledger actions) that only open an existing store: a missing
# bucket is an error there, so --create-bucket would do nothing and is refused.
EXISTING_STORE_ONLY = {"consume", "query", "inspect", "verify", "metrics", "gc", "ledger list",
                       "ledger status", "ledger read", "ledger offload", "ledger sweep",
                       "ledger delete"}


def refuse_create_bucket(args: argparse.Namespace) -> None:
    """``--create-bucket`` on a command of :data:`EXISTING_STORE_ONLY` is an error."""
    name = " ".join(filter(None, (args.command, getattr(args, "ledger_command", None))))
    if getattr(args, "s3_create_bucket", False) and name in EXISTING_STORE_ONLY:
        raise CliError(f"--create-bucket: {name} opens an existing store and creates no "
                       "bucket; create it with produce, demo or ledger append")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="tieredstore", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tieredstore {__version__}",
                        help="print the version and exit")
    add_common_options(parser)
    parser.set_defaults(**option_defaults())
    common = Parser(add_help=False)
    add_common_options(common)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        # A command is listed where it can run: bench only beside its suite (it
        # still parses elsewhere, to say where the suite is).
        listed = {"help": module.HELP} if module is not bench or bench.find_suite() else {}
        command = sub.add_parser(name, parents=[common], description=module.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 **listed)
        command.set_defaults(run=module.run)
        module.add_arguments(command, common)
    return parser


def _log_warnings() -> None:
    """Warnings and errors of the library to stderr, unless the host set up logging."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        if root.level > logging.WARNING:
            root.setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (argparse exits 2 on bad arguments)."""
    _log_warnings()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passthrough", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    debug = bool(getattr(args, "debug", False))
    if debug:
        logging.getLogger("tieredstore").setLevel(logging.DEBUG)
        for handler in logging.getLogger().handlers:
            handler.setLevel(logging.DEBUG)
    try:
        refuse_create_bucket(args)
        code: int = args.run(args)
    except ConfigError as exc:  # a port that --metrics-port named: say so, as for --listen
        if exc.key != "metrics_port" or args.metrics_port is None:
            return _failed(exc, debug)
        return _failed(CliError(f"--metrics-port: {exc.detail}"), debug)
    except WriterLive as exc:
        return _failed(CliError(f"{exc}; --take-over takes it over (that writer is then "
                                "fenced for good)"), debug)
    except KeyboardInterrupt:
        print("tieredstore: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tieredstore consume ... | head`: not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # every failure: one line, exit 2 (1 is "found something")
        return _failed(exc, debug)
    return code


def _failed(exc: Exception, debug: bool) -> int:
    """Say what stopped the command on one line (with ``--debug`` the traceback too)."""
    if debug:
        traceback.print_exc()
    hint = "" if debug or isinstance(exc, TieredStoreError) else " (--debug shows the traceback)"
    print(f"tieredstore: {describe_error(exc)}{hint}", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
