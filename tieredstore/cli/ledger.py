"""``tieredstore ledger append | list | status | read | offload | sweep | delete``:
managed ledgers and their offloads (the Pulsar adapter), named by ``--name``.

The local ledgers (BookKeeper's part: a managed ledger's entries until they
are offloaded) live in this host's ledger directory: ``--ledger-dir DIR``,
else ``ledger_dir`` (``TIEREDSTORE_LEDGER_DIR``), else
``<local_path>/ledgers``; a relative path is relative to the working
directory, so name one absolute directory wherever the commands run.
``append``, ``list`` and ``status`` print it (``local ledgers: DIR``), and
every ``--json`` document holds it (``"ledger_dir"``, absolute). The
metadata and the offloads are in the configured bucket
(``ledger_root``, ``offload_*`` keys; ``--prefix``, ``--cluster`` and
``--broker`` name the message store's keys and are refused here). A ledger
is ``local`` only if this directory holds its copy; one the metadata keeps
that is not here is ``missing`` (``local_missing``), and ``append`` and
``offload``, which need those copies, refuse to run (exit 2, naming the
directory, before taking anything over). ``list``,
``status`` and ``read`` only read: they never take the managed ledger over. ``append`` creates the
managed ledger (and a local store) if need be, takes it over and appends
entries: ``--entry TEXT`` (repeated), else one per line of stdin;
``--rollover`` closes its ledger after them (no entries and no
``--rollover`` is an error, before anything is taken over). ``offload``, ``sweep`` and
``delete`` take it over, fencing any other owner (run them with the broker
that owns it stopped); they append nothing, so they start no new ledger (the
one left open is closed, and dropped if empty, as Pulsar drops a ledger
closed empty): running them again and again adds no ledger. Every action
but ``append`` refuses a managed ledger that does not exist (exit 2).

- ``status``: per ledger, its offload: ``none``, ``in progress`` (recorded,
  not complete: running, or its owner died), ``failed`` (with the error) or
  ``complete``;
- ``offload --before LEDGER:ENTRY`` offloads every closed ledger before that
  position (Pulsar's ``offloadPrefix``); without it, the ledgers the offload
  thresholds select if one is set, else every closed ledger;
- ``sweep`` trims the ledgers past retention (if set), deletes the local
  copies whose offload completed ``ledger_deletion_lag`` ago, then the
  offload attempts no managed ledger references (older than
  ``gc_safety_age``; ``--dry-run`` lists them and takes nothing over);
- ``delete --before ID`` drops every ledger below ``ID``, both copies; an
  ``ID`` past the last ledger + 1 is refused (exit 2), nothing changed.

Thresholds, retention and deletion lag come from the configuration
(``offload_threshold_bytes``, ``offload_threshold_time``,
``ledger_retention_bytes``, ``ledger_retention_time``,
``ledger_deletion_lag``) or the flags of the same names, which override it,
on the action each has an effect in: ``offload`` the thresholds, ``sweep``
retention and the deletion lag (``append --rollover`` follows the configured
thresholds too, as a broker's rollover does).

``list`` without ``--name`` lists the managed ledgers under ``ledger_root``:
each one's ledgers, first and open ledger, how many are offloaded, local
here and missing here.

``--json`` prints one document, each with ``"ledger_dir"``: ``append``:
``{"name", "positions": ["LEDGER:ENTRY"]}``; ``list`` without ``--name``:
``{"root", "managed_ledgers": [{"name", "ledgers", "first_ledger",
"open_ledger", "offloaded", "local", "local_missing"}]}`` (the last three
counts of ledgers); ``list``/``status``: ``{"name", "ledgers":
[{"ledger_id", "state", "entries", "bytes", "offload", "offload_uuid",
"local", "local_missing", "failure"}]}`` (``state``: ``open`` or ``closed``; the metadata
records ``entries`` and ``bytes`` when a ledger closes: for the open ledger
they are what its local copy holds now, null without a local copy) and
``"owner"``: the newest owner's liveness record (``writer, host, pid, state,
started_ms, last_seen_ms, heartbeat_interval_s``) or null;
``read``: ``{"name", "ledger_id", "entries": [{"entry_id", "size",
"payload_base64"}]}``; ``offload``: ``{"name", "offloaded": [ids],
"first_not_offloaded": "LEDGER:ENTRY"}``; ``sweep``:
``{"name", "trimmed_before", "local_copies_deleted": [ids] or null (dry
run), "offload_garbage": the document of ``gc --json``}``; ``delete``:
``{"name", "first_ledger"}``.

``--metrics-port PORT`` (``append``, ``offload``, ``sweep``, ``delete``: the
actions that take the managed ledger over) serves the host's requests, their
cost and its offload counters (``tieredstore_offload_*_total``) while the
action runs; the read-only actions serve nothing.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import sys
import time
from typing import Any

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.ledger import (
    LedgerHost,
    LedgerNotFound,
    LedgerRow,
    ManagedLedger,
    ManagedLedgerNotFound,
    Position,
    sweep_offloads,
)
from tieredstore.store import open_object_store, prepare_bucket

from .common import (
    EXIT_OK,
    LOCATION,
    MESSAGE_STORE_KEYS,
    CliError,
    add_metrics_port,
    add_take_over,
    open_existing_store,
    print_json,
    resolve_config,
    table,
)
from .store.gc import as_document, render

HELP = ("managed ledgers and their offloads: append, list, status, read, offload, sweep, "
        "delete")

# flag -> configuration key; each feeds ManagedLedgerConfig as the key does
MANAGED_FLAGS = {
    "--offload-threshold-bytes": ("offload_threshold_bytes", "SIZE",
                                  "offload the oldest closed ledgers once the newer ones hold "
                                  "more than this (e.g. 10MiB; off: none)"),
    "--offload-threshold-time": ("offload_threshold_time", "DURATION",
                                 "offload ledgers closed this long ago (e.g. 4h; off: none)"),
    "--retention-bytes": ("ledger_retention_bytes", "SIZE",
                          "trim the oldest ledgers past this size (sweep; off: no limit)"),
    "--retention-time": ("ledger_retention_time", "DURATION",
                         "trim ledgers closed longer ago than this (sweep; off: no limit)"),
    "--deletion-lag": ("ledger_deletion_lag", "DURATION",
                       "keep a local copy this long after its offload completed (e.g. 4h)"),
}

# The action each flag above has an effect in: offload follows the thresholds (without
# --before), sweep applies retention and the deletion lag; delete follows none of them.
FLAGS_OF = {"offload": ("--offload-threshold-bytes", "--offload-threshold-time"),
            "sweep": ("--retention-bytes", "--retention-time", "--deletion-lag")}

# The actions that take the managed ledger over (a writer: --metrics-port serves it).
WRITERS = ("append", "offload", "sweep", "delete")


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    for action, text in (("append", "append entries (creating the managed ledger)"),
                         ("list", "each ledger: entries, bytes, offloaded, local copy"),
                         ("status", "each ledger's offload: none, in progress, failed, "
                                    "complete"),
                         ("read", "print entries of a closed ledger"),
                         ("offload", "offload closed ledgers (before --before, or as the "
                                     "thresholds say, or all)"),
                         ("sweep", "trim past retention, delete local copies past the lag, "
                                   "and unreferenced offload attempts"),
                         ("delete", "drop every ledger below --before")):
        one = commands.add_parser(action, parents=[common], help=text, description=text)
        one.add_argument("--name", required=action != "list",
                         help="the managed ledger, e.g. tenant/ns/persistent/topic" + (
                             " (without it: every managed ledger under ledger_root)"
                             if action == "list" else ""))
        one.add_argument("--ledger-dir", "--ledgers", dest="ledger_dir", metavar="DIR",
                         help="the local ledgers' directory (ledger_dir; default: "
                              "<local_path>/ledgers, relative to the working directory "
                              "if local_path is); list and status print it")
        if action in WRITERS:
            add_metrics_port(one, "the ledger host's requests, their cost and its offload "
                                  "counters (tieredstore_offload_*_total; docs/metrics.md)")
            add_take_over(one, "the managed ledger")
        if action == "append":
            one.add_argument("--entry", action="append", metavar="TEXT",
                             help="an entry's payload (UTF-8); repeat it for more; without "
                                  "it, one entry per line of stdin")
            one.add_argument("--rollover", action="store_true",
                             help="close the ledger after the entries (it can then be "
                                  "offloaded)")
        if action == "read":
            one.add_argument("--ledger", type=int, required=True, metavar="ID",
                             help="the ledger to read")
            one.add_argument("--first", type=int, default=0, metavar="ENTRY",
                             help="the first entry id to print (default 0)")
            one.add_argument("--last", type=int, default=None, metavar="ENTRY",
                             help="the last entry id to print, inclusive (default: the last)")
        if action == "offload":
            one.add_argument("--before", type=position, metavar="LEDGER:ENTRY",
                             help="offload every closed ledger before this position "
                                  "(3:0: the ledgers before ledger 3)")
        for flag in FLAGS_OF.get(action, ()):
            _, metavar, help_text = MANAGED_FLAGS[flag]
            one.add_argument(flag, metavar=metavar, help=help_text)
        if action == "sweep":
            one.add_argument("--dry-run", action="store_true",
                             help="list the unreferenced offload objects, delete nothing "
                                  "(takes nothing over)")
        if action == "delete":
            one.add_argument("--before", type=int, required=True, metavar="ID",
                             help="drop every ledger whose id is below ID")


def position(text: str) -> Position:
    """``LEDGER:ENTRY``, both whole numbers >= 0. A ledger id alone is refused:
    ``ledger delete --before`` takes one, and an offload's position must not
    be a guess at which of the two was meant."""
    ledger, sep, entry = text.partition(":")
    try:
        if not sep:
            raise ValueError(text)
        got = Position(int(ledger), int(entry))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected LEDGER:ENTRY, a position (e.g. 3:0: every closed ledger before "
            f"ledger 3), got {text!r}") from None
    if got.ledger_id < 0 or got.entry_id < 0:
        raise argparse.ArgumentTypeError(f"a position is not negative, got {text!r}")
    return got


def refuse_store_key_flags(args: argparse.Namespace) -> None:
    """``--prefix``, ``--cluster`` and ``--broker`` name the message store's keys; a
    managed ledger's are under ``ledger_root`` and ``offload_prefix`` (their own
    config keys, PIP-17's names below the latter), which these flags do not move:
    given to a ledger action they would do nothing, so they are refused."""
    for flag in MESSAGE_STORE_KEYS:
        if getattr(args, LOCATION[flag][0], None) is not None:
            raise CliError(f"{flag} names the message store's keys, not a managed ledger's: "
                           "those are under ledger_root and offload_prefix (the [ledger] "
                           "keys of the config file, or TIEREDSTORE_LEDGER_ROOT and "
                           "TIEREDSTORE_OFFLOAD_PREFIX)")


def run(args: argparse.Namespace) -> int:
    refuse_store_key_flags(args)
    given = {key: flag for flag, (key, _, _) in (*MANAGED_FLAGS.items(),
                                                 ("--ledger-dir", ("ledger_dir", "", "")))
             if getattr(args, flag[2:].replace("-", "_"), None) is not None}
    overrides = {key: getattr(args, flag[2:].replace("-", "_")) for key, flag in given.items()}
    config = resolve_config(args, given, **overrides)
    return sync.run(_run(config, args))


def emit(args: argparse.Namespace, host: LedgerHost, document: dict[str, Any],
         text: str) -> int:
    """Print ``document`` as JSON with ``--json`` (the shapes: the module doc; each
    with ``ledger_dir``, the local ledgers' directory), else ``text``."""
    if args.json:
        print_json({**document, "ledger_dir": host.ledger_dir})
    else:
        print(text)
    return EXIT_OK


async def _run(config: TieredStoreConfig, args: argparse.Namespace) -> int:
    action = args.ledger_command
    if action == "append":  # creates the managed ledger: a bucket as the writers prepare it
        store = open_object_store(config)
        try:
            await prepare_bucket(store, config)
        except BaseException:
            await store.close()
            raise
    else:
        store = open_existing_store(config)
    try:
        host = LedgerHost.create(config, store)
    except BaseException:
        await store.close()
        raise
    try:
        return await _act(host, config, args)
    except LedgerNotFound as exc:  # a ledger the metadata records, not in this directory
        raise CliError(f"{exc} (the local ledger directory: ledger_dir, or "
                       "<local_path>/ledgers): run where the managed ledger's local copies "
                       "are, or name their directory with --ledger-dir or "
                       "TIEREDSTORE_LEDGER_DIR") from None
    finally:
        await host.close()
        await host.store.close()


async def _act(host: LedgerHost, config: TieredStoreConfig, args: argparse.Namespace) -> int:
    action = args.ledger_command
    if action in WRITERS and not getattr(args, "dry_run", False):
        await _check_local_copies(host, args)
    if action == "append":
        return await _append(host, args)
    if action == "list" and args.name is None:
        return await _list_all(host, args)
    if action in ("list", "status"):
        rows = await host.ledger_rows(args.name)
        seen, now = await host.owner_seen(args.name), time.time()
        owner = "owner: none recorded" if seen is None else \
            f"owner: {seen.state(now)}, {seen.describe(now)}"
        return emit(args, host, {"name": args.name, "ledgers": [_row(r) for r in rows],
                                 "owner": None if seen is None else seen.document(now)},
                    _table(host, rows, status=action == "status") + f"\n{owner}")
    if action == "read":
        entries = await host.read(args.name, args.ledger, args.first, args.last)
        return emit(args, host, {"name": args.name, "ledger_id": args.ledger, "entries": [
                {"entry_id": e.entry_id, "size": len(e.payload),
                 "payload_base64": base64.b64encode(bytes(e.payload)).decode()}
            for e in entries]}, "\n".join(f"{args.ledger}:{e.entry_id}\t{len(e.payload)}\t"
                                          f"{_show(e.payload)}" for e in entries))
    if action == "sweep" and args.dry_run:  # lists only: no take-over
        await host.ledger_rows(args.name)  # an unknown name is an error, as for the rest
        return await _sweep(host, config, args, None)
    return await _take_over(host, config, args)


async def _check_local_copies(host: LedgerHost, args: argparse.Namespace) -> None:
    """Before an action takes the managed ledger over: the local copies the
    metadata keeps that this host's ledger directory does not hold. ``append``
    needs every one (the open ledger's to close it; new ledger ids come from
    the directory) and ``offload`` those not offloaded yet: either refuses,
    naming the directory, before anything is written. ``sweep`` and ``delete``
    run, and say which copies they cannot delete here."""
    action = args.ledger_command
    try:
        rows = await host.ledger_rows(args.name)
    except ManagedLedgerNotFound:
        return  # append creates it; the others refuse it as they run
    missing = [r for r in rows if r.local_missing]
    needed = missing if action == "append" else [r for r in missing if not r.offloaded]
    if not missing:
        return
    ids = ", ".join(str(r.ledger_id) for r in (needed if action in ("append", "offload")
                                               else missing))
    where = (f"the metadata keeps the local copies of ledger(s) {ids} of {args.name!r}, but "
             f"the local ledger directory here, {host.ledger_dir}, does not hold them")
    if action in ("append", "offload") and needed:
        raise CliError(f"{where}: {action} needs them; run it where they are, or name their "
                       "directory with --ledger-dir or TIEREDSTORE_LEDGER_DIR (nothing was "
                       "changed)")
    if action in ("sweep", "delete"):
        print(f"tieredstore ledger {action}: {where}: they stay where they are",
              file=sys.stderr)


async def _list_all(host: LedgerHost, args: argparse.Namespace) -> int:
    """``ledger list`` without ``--name``: each managed ledger under ``ledger_root``,
    summed up from its rows (:meth:`LedgerHost.ledger_rows`)."""
    summaries = []
    for name in await host.managed_ledgers():
        try:
            rows = await host.ledger_rows(name)
        except ManagedLedgerNotFound:  # keys, but no head (a create that died): none
            continue
        summaries.append({
            "name": name, "ledgers": len(rows),
            "first_ledger": rows[0].ledger_id if rows else None,
            "open_ledger": next((r.ledger_id for r in rows if r.state == "open"), None),
            "offloaded": sum(r.offloaded for r in rows),
            "local": sum(r.local for r in rows),
            "local_missing": sum(r.local_missing for r in rows)})
    missing = ", ".join(f"{m['local_missing']} ledger(s) of {m['name']}" for m in summaries
                        if m["local_missing"])
    text = table([[m["name"], m["ledgers"], m["first_ledger"], m["open_ledger"],
                   m["offloaded"], m["local"], m["local_missing"]] for m in summaries],
                 ["managed ledger", "ledgers", "first", "open", "offloaded", "local",
                  "missing here"])
    return emit(args, host, {"root": host.config.ledger_root, "managed_ledgers": summaries},
                f"{text}\n{_where(host, missing)}")


async def _append(host: LedgerHost, args: argparse.Namespace) -> int:
    if args.entry is None and sys.stdin.isatty():
        print("tieredstore ledger append: reading entries from standard input, one a line; "
              "end with Ctrl-D (or give --entry TEXT)", file=sys.stderr)
    texts = args.entry if args.entry is not None else sys.stdin.read().splitlines()
    if not texts and not args.rollover:  # taking it over for nothing would fence its owner
        raise CliError("no entries to append: give --entry TEXT or lines on standard input "
                       "(--rollover alone closes the current ledger)")
    ml = await host.open(args.name, writer_id=_writer_id(), take_over=args.take_over)
    try:
        positions = await ml.add_entries([t.encode() for t in texts]) if texts else []
        if args.rollover:
            await ml.rollover()
    finally:
        await ml.close()
    shown = [f"{p.ledger_id}:{p.entry_id}" for p in positions]
    return emit(args, host, {"name": args.name, "positions": shown},
                f"appended {len(shown)} entr{'y' if len(shown) == 1 else 'ies'}"
                + (f": {shown[0]} to {shown[-1]}" if shown else "")
                + f" (local ledgers: {host.ledger_dir})")


def _writer_id() -> str:
    return f"tieredstore-cli@{socket.gethostname()}:{os.getpid()}"


def _row(r: LedgerRow) -> dict[str, Any]:
    return {"ledger_id": r.ledger_id, "state": r.state, "entries": r.entries, "bytes": r.size,
            "offload": r.offload, "offload_uuid": r.offload_uuid, "local": r.local,
            "local_missing": r.local_missing, "failure": r.failure}


def _table(host: LedgerHost, rows: list[LedgerRow], *, status: bool) -> str:
    """The rows, then where the local ledgers are and which copies are not there."""
    if status:
        text = table([[r.ledger_id, r.state, r.entries, r.size, r.offload, r.offload_uuid,
                       r.failure] for r in rows],
                     ["ledger", "state", "entries", "bytes", "offload", "uuid", "failure"])
    else:
        text = table([[r.ledger_id, r.state, r.entries, r.size, r.offloaded,
                       "missing" if r.local_missing else r.local, r.offload_uuid]
                      for r in rows],
                     ["ledger", "state", "entries", "bytes", "offloaded", "local", "uuid"])
    missing = ", ".join(str(r.ledger_id) for r in rows if r.local_missing)
    return f"{text}\n{_where(host, f'ledger(s) {missing}' if missing else '')}"


def _where(host: LedgerHost, missing: str) -> str:
    """``local ledgers: DIR``, and, if copies the metadata keeps are not there
    (``missing`` says whose), that they are missing here."""
    line = f"local ledgers: {host.ledger_dir}"
    if not missing:
        return line
    return (f"{line}\nmissing here: the metadata keeps the local copies of {missing}, but "
            f"{host.ledger_dir} does not hold them (another host's or another directory's: "
            "run where they are, or name it with --ledger-dir or TIEREDSTORE_LEDGER_DIR)")


async def _sweep(host: LedgerHost, config: TieredStoreConfig, args: argparse.Namespace,
                 ml: ManagedLedger | None) -> int:
    """Trim past retention and delete local copies past the lag (``ml``, taken
    over), then unreferenced offload attempts; with no ``ml`` (a dry run),
    list the attempts only."""
    dry_run = ml is None
    trimmed = None if ml is None else await ml.apply_retention()
    local = None if ml is None else await ml.delete_offloaded_local_copies()
    report = await sweep_offloads(host.offloader, host.store, root=config.ledger_root,
                                  safety_age=config.gc_safety_age, dry_run=dry_run)
    lines = []
    if local is None:
        lines.append("local copies: left alone (a dry run does not take the managed ledger "
                     "over)")
    else:
        if trimmed is not None:
            lines.append(f"retention: the first ledger is now {trimmed}")
        lines.append(f"local copies deleted, of ledgers: {', '.join(map(str, local)) or '-'}")
    lines.append(f"offload garbage: {render(report)}")
    return emit(args, host, {"name": args.name, "trimmed_before": trimmed,
                       "local_copies_deleted": local,
                       "offload_garbage": as_document(report)},
                "\n".join(lines))


async def _take_over(host: LedgerHost, config: TieredStoreConfig, args: argparse.Namespace
                     ) -> int:
    ml = await host.open(args.name, appending=False, writer_id=_writer_id(),
                         take_over=args.take_over)
    try:
        action = args.ledger_command
        if action == "offload":
            before = {r.ledger_id for r in await host.ledger_rows(args.name) if r.offloaded}
            if args.before is not None:
                first = await ml.offload_prefix(args.before)
            elif ml.config.offload_triggers:
                first = await ml.maybe_offload() or ml.first_not_offloaded()
            else:
                first = await ml.offload_prefix(Position(2**63 - 1, 0))
            done = [r.ledger_id for r in await host.ledger_rows(args.name)
                    if r.offloaded and r.ledger_id not in before]
            return emit(args, host, {"name": args.name, "offloaded": done,
                               "first_not_offloaded": f"{first.ledger_id}:{first.entry_id}"},
                        f"offloaded {len(done)} ledger(s): {', '.join(map(str, done)) or '-'}")
        if action == "sweep":
            return await _sweep(host, config, args, ml)
        if action == "delete":
            first_ledger = await ml.trim(args.before)
            return emit(args, host, {"name": args.name, "first_ledger": first_ledger},
                        f"the first ledger is now {first_ledger}")
        raise CliError(f"unknown ledger action {action!r}")
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
