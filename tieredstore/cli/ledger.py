"""``tieredstore ledger list | read | offload | sweep | delete``: managed ledgers and
their offloads (the Pulsar adapter), named by ``--name``.

The local ledgers live in ``--ledgers DIR`` (default ``ledger_dir``, or
``<local_path>/ledgers``); metadata and offloads in the configured bucket
(``ledger_root``, ``offload_*`` keys). ``list`` and ``read`` only read.
``offload``, ``sweep`` and ``delete`` take the managed ledger over, fencing any
other owner (run them with the broker that owns it stopped):

- ``offload`` offloads every closed ledger not offloaded yet;
- ``sweep`` deletes the local copies whose offload completed
  ``ledger_deletion_lag`` seconds ago, then the offload attempts no managed
  ledger references (older than ``gc_safety_age``; ``--dry-run`` lists them);
- ``delete --before ID`` drops every ledger below ``ID``, both copies.
"""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.ledger import LedgerHost, ManagedLedger, Position, sweep_offloads

from .common import EXIT_OK, open_existing_store, resolve_config, table
from .gc import render

HELP = "managed ledgers and their offloads: list, read, offload, sweep, delete"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    for action, text in (("list", "each ledger: entries, bytes, offloaded, local copy"),
                         ("read", "print entries of a closed ledger"),
                         ("offload", "offload every closed ledger not offloaded yet"),
                         ("sweep", "delete local copies past the lag, and unreferenced "
                                   "offload attempts"),
                         ("delete", "drop every ledger below --before")):
        one = commands.add_parser(action, parents=[common], help=text)
        one.add_argument("--name", required=True, help="the managed ledger")
        one.add_argument("--ledgers", metavar="DIR", help="the local ledgers' directory "
                         "(default: ledger_dir, or <local_path>/ledgers)")
        if action == "read":
            one.add_argument("--ledger", type=int, required=True, metavar="ID")
            one.add_argument("--first", type=int, default=0, metavar="ENTRY")
            one.add_argument("--last", type=int, default=None, metavar="ENTRY")
        if action == "sweep":
            one.add_argument("--dry-run", action="store_true",
                             help="list the unreferenced offload objects, delete nothing")
        if action == "delete":
            one.add_argument("--before", type=int, required=True, metavar="ID")


def run(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    return sync.run(_run(config, args))


async def _run(config: TieredStoreConfig, args: argparse.Namespace) -> int:
    host = LedgerHost.create(config, open_existing_store(config), args.ledgers)
    try:
        action = args.ledger_command
        if action == "list":
            rows = await host.ledger_rows(args.name)
            print(table([[r.ledger_id, r.state, r.entries, r.size, r.offloaded, r.local,
                          r.offload_uuid] for r in rows],
                        ["ledger", "state", "entries", "bytes", "offloaded", "local", "uuid"]))
            return EXIT_OK
        if action == "read":
            for entry in await host.read(args.name, args.ledger, args.first, args.last):
                print(f"{args.ledger}:{entry.entry_id}\t{len(entry.payload)}\t"
                      f"{_show(entry.payload)}")
            return EXIT_OK
        if action == "sweep" and args.dry_run:  # lists only: no take-over
            return await _sweep(host, config, None)
        return await _take_over(host, config, args)
    finally:
        await host.close()
        await host.store.close()


async def _sweep(host: LedgerHost, config: TieredStoreConfig, ml: ManagedLedger | None
                 ) -> int:
    """Delete local copies past the lag (``ml``, taken over) and unreferenced offload
    attempts; with no ``ml`` (a dry run), list the attempts only."""
    dry_run = ml is None
    local = [] if ml is None else await ml.delete_offloaded_local_copies()
    report = await sweep_offloads(host.offloader, host.store, root=config.ledger_root,
                                  safety_age=config.gc_safety_age, dry_run=dry_run)
    if ml is None:
        print("local copies: left alone (a dry run does not take the managed ledger over)")
    else:
        print(f"local copies deleted: {', '.join(map(str, local)) or '-'}")
    print(f"offload garbage: {render(report)}")
    return EXIT_OK


async def _take_over(host: LedgerHost, config: TieredStoreConfig, args: argparse.Namespace
                     ) -> int:
    ml = await host.open(args.name, writer_id=f"tieredstore-cli@{socket.gethostname()}:"
                                              f"{os.getpid()}")
    try:
        action = args.ledger_command
        if action == "offload":
            before = {r.ledger_id for r in await host.ledger_rows(args.name) if r.offloaded}
            await ml.offload_prefix(Position(ml.current_ledger_id, 0))
            done = [r.ledger_id for r in await host.ledger_rows(args.name)
                    if r.offloaded and r.ledger_id not in before]
            print(f"offloaded {len(done)} ledger(s): {', '.join(map(str, done)) or '-'}")
        elif action == "sweep":
            return await _sweep(host, config, ml)
        else:
            first = await ml.trim(args.before)
            print(f"the first ledger is now {first}")
        return EXIT_OK
    finally:
        await ml.close()


def _show(payload: Any, limit: int = 64) -> str:
    """A payload as text if it is printable UTF-8, else hex; cut at ``limit``."""
    data = bytes(payload)[:limit]
    try:
        text = data.decode()
        shown = text if text.isprintable() else data.hex()
    except UnicodeDecodeError:
        shown = data.hex()
    return shown + ("..." if len(payload) > limit else "")
