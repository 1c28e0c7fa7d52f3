"""The command line's uniform surface: every command's ``--json`` parsed, run on a
local directory and on moto with the store named by flags alone (no config
file, no ``TIEREDSTORE_*`` variables; S3 credentials from boto3's own chain,
``AWS_ACCESS_KEY_ID``); unknown topics and queues are errors; help for every
option, without markup; ``--version``."""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import itertools
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server
from tieredstore import __version__
from tieredstore.cli import bench as bench_cmd
from tieredstore.cli import build_parser, main

_buckets = itertools.count()
MESSAGES = 20  # per queue; queues 0 and 1 of "orders"
LEDGER = "tenant/ns/persistent/surface"  # a managed ledger beside the queues
ENTRIES = ["one", "two", "three"]  # its ledger 0, closed


@dataclass
class Where:
    """A store named by flags alone, with its messages produced."""

    backend: str
    flags: list[str]
    produced: list[dict[str, Any]]
    appended: dict[str, Any]  # ledger append --json, the first command run on the store
    ledgers: str  # the managed ledger's local directory

    def run(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, *self.flags])
        out = capsys.readouterr()
        return code, out.out, out.err

    def json(self, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
        code, out, err = self.run(capsys, *args, "--json")
        assert code == 0, f"tieredstore {' '.join(args)} --json exited {code}:\n{out}\n{err}"
        return json.loads(out)

    def lines(self, capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
        code, out, err = self.run(capsys, *args, "--json")
        assert code == 0, f"tieredstore {' '.join(args)} --json exited {code}:\n{out}\n{err}"
        return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def clean_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No TIEREDSTORE_* variables, no conf/tieredstore.toml in the working
    directory; boto3's chain has the test server's credentials."""
    work = tmp_path_factory.mktemp("surface")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("TIEREDSTORE_"):
                patch.delenv(name)
        patch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        patch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        patch.chdir(work)
        yield work


def s3_flags(server: S3Server) -> list[str]:
    bucket = f"cli-{os.getpid()}-{next(_buckets)}"
    return ["--bucket", bucket, "--endpoint", server.endpoint_url, "--region", "us-east-1"]


@pytest.fixture(scope="module", params=["local", "moto"])
def where(request: pytest.FixtureRequest, clean_environment: Path) -> Where:
    """One store per backend for the module, produced to through the command line."""
    if request.param == "local":
        flags = ["--data-dir", str(clean_environment / "data")]
    else:
        flags = s3_flags(request.getfixturevalue("moto"))
    ledgers = str(clean_environment / f"ledgers-{request.param}")

    def run_json(*argv: str) -> Any:
        out = io.StringIO()
        sys.stdout, saved = out, sys.stdout
        try:
            code = main([*argv, "--json", *flags])
        finally:
            sys.stdout = saved
        assert code == 0, out.getvalue()
        return json.loads(out.getvalue())

    # First on the store: on moto the ledger's append creates the bucket (--create-bucket).
    create = ["--create-bucket"] if request.param == "moto" else []
    appended = run_json("ledger", "append", "--name", LEDGER, "--ledgers", ledgers, *create,
                        "--rollover", *itertools.chain(*(("--entry", e) for e in ENTRIES)))
    produced = [run_json("produce", "--topic", "orders", "--queue", queue, "--count",
                         str(MESSAGES), "--key", f"k{queue}") for queue in ("0", "1")]
    return Where(request.param, flags, produced, appended, ledgers)


def test_produce_prints_what_it_appended(where: Where) -> None:
    assert where.produced == [
        {"topic": "orders", "queue": q, "count": MESSAGES, "bytes": 100 * MESSAGES,
         "first_offset": 0, "end_offset": MESSAGES, "seconds": where.produced[q]["seconds"]}
        for q in (0, 1)]


def test_consume_and_query_print_json_lines(where: Where,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    got = where.lines(capsys, "consume", "--topic", "orders", "--queue", "1", "--from", "15")
    assert [(m["broker"], m["topic"], m["queue"], m["offset"], m["keys"]) for m in got] == [
        ("broker-0", "orders", 1, offset, ["k1"]) for offset in range(15, MESSAGES)]
    assert got[0]["body"].startswith("message 15 ") and got[0]["encoding"] == "utf-8"
    found = where.lines(capsys, "query", "--topic", "orders", "--key", "k0", "--count", "3")
    assert [(m["broker"], m["queue"], m["offset"]) for m in found] == [
        ("broker-0", 0, o) for o in range(17, 20)]


def test_inspect_lists_every_view_as_json(where: Where,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    [topic] = where.json(capsys, "inspect", "topics")
    assert (topic["broker"], topic["topic"], topic["queues"], topic["messages"]) == (
        "broker-0", "orders", 2, 2 * MESSAGES)
    queues = where.json(capsys, "inspect", "queues")
    assert [(q["broker"], q["queue"], q["min_offset"], q["max_offset"]) for q in queues] == [
        ("broker-0", 0, 0, MESSAGES), ("broker-0", 1, 0, MESSAGES)]
    segments = where.json(capsys, "inspect", "segments", "--queue", "0")
    assert {s["type"] for s in segments} >= {"commitlog", "consumequeue"}
    assert {s["broker"] for s in segments} == {"broker-0"}
    chunks = where.json(capsys, "inspect", "chunks", "--topic", "orders", "--queue", "0",
                        "--type", "commitlog")
    assert chunks and all(len(c["crc32c"]) == 8 and c["broker"] == "broker-0"
                          for c in chunks)
    [broker] = where.json(capsys, "inspect", "brokers")
    assert (broker["broker"], broker["state"]) == ("broker-0", "closed"), broker
    # object: the key below the segment's file (a chunk or merged object of the
    # segment), or the whole key of the broker's log object that holds the unit
    assert all(c["object"].startswith(f"seg-{c['base']:020d}/") or "/log/log-" in c["object"]
               for c in chunks), chunks


def test_one_name_means_one_thing_across_commands(
        where: Where, capsys: pytest.CaptureFixture[str]) -> None:
    """``stored_bytes`` is a queue's live bytes (metrics) and nothing else; a
    segment's own objects are ``object_bytes``; verify's ``checked_bytes`` are
    what it read (no key index), not what is stored; offsets end exclusive."""
    segments = where.json(capsys, "inspect", "segments", "--queue", "0")
    assert all("stored_bytes" not in s and "last_offset" not in s for s in segments)
    recorded = [s for s in segments if s["recorded"]]
    assert all(s["end_offset"] > s["first_offset"] for s in recorded), recorded
    for kind in ("commitlog", "consumequeue"):
        ranges = [(s["first_offset"], s["end_offset"]) for s in recorded if s["type"] == kind]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges)), ranges
    [queue] = where.json(capsys, "verify", "--topic", "orders", "--queue", "0")["queues"]
    assert "bytes" not in queue and queue["checked_bytes"] > 0
    assert "object_bytes" not in where.json(capsys, "metrics")["queues"][0]


@pytest.mark.parametrize("what", [[], ["queues"], ["topics"]])
@pytest.mark.parametrize("option", [["--segment", "0"], ["--type", "commitlog"]])
def test_inspect_refuses_a_segment_option_where_it_lists_no_segments(
        where: Where, capsys: pytest.CaptureFixture[str], what: list[str],
        option: list[str]) -> None:
    """--segment and --type select segments and chunks: on the queues or topics
    listing they would do nothing, so they are refused."""
    code, out, err = where.run(capsys, "inspect", *what, *option)
    assert (code, out) == (2, "") and \
        f"{option[0]} selects segments and chunks only" in err, err


def test_verify_recover_repair_and_gc_print_one_document(
        where: Where, capsys: pytest.CaptureFixture[str]) -> None:
    report = where.json(capsys, "verify")
    assert (report["error_count"], report["messages"]) == (0, 2 * MESSAGES)
    assert [(q["broker"], q["queue"], q["min_offset"], q["max_offset"])
            for q in report["queues"]] == [("broker-0", 0, 0, MESSAGES),
                                           ("broker-0", 1, 0, MESSAGES)]
    assert sum(report["requests"].values()) > 0
    assert where.json(capsys, "verify", "--topic", "orders", "--queue", "1")["messages"] \
        == MESSAGES
    recovered = where.json(capsys, "recover")
    assert [(q["queue"], q["state"], q["max_offset"]) for q in recovered["queues"]] == [
        (0, "ok", MESSAGES), (1, "ok", MESSAGES)]
    assert where.json(capsys, "repair") == {"queues": [], "rebuilt": 0, "failed": 0}
    swept = where.json(capsys, "gc", "--dry-run")
    assert swept["dry_run"] is True and swept["deleted"] == 0
    assert isinstance(swept["found"], list) and isinstance(swept["by_kind"], dict)
    young = where.json(capsys, "gc", "--dry-run", "--safety-age", "0")  # the log's fences
    assert all(set(g) == {"broker", "kind", "key", "detail"} for g in young["found"]), young
    assert all(g["broker"] == "broker-0" for g in young["found"] if "/log/" in g["key"])


def test_ledger_actions_print_one_document(where: Where,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """append (the fixture's), list, status, offload, read and sweep --dry-run: each
    one JSON document, on the store the flags name."""
    ledger = ["--name", LEDGER, "--ledgers", where.ledgers]
    assert where.appended == {"name": LEDGER, "positions": ["0:0", "0:1", "0:2"],
                              "ledger_dir": where.ledgers}
    listed = where.json(capsys, "ledger", "list", *ledger)
    assert listed["name"] == LEDGER
    assert [(r["ledger_id"], r["state"], r["entries"], r["bytes"], r["offload"], r["local"])
            for r in listed["ledgers"]][:1] == [
        (0, "closed", 3, sum(map(len, ENTRIES)), "none", True)]
    assert set(listed["ledgers"][0]) == {"ledger_id", "state", "entries", "bytes", "offload",
                                         "offload_uuid", "local", "local_missing", "failure"}
    assert listed["ledger_dir"] == where.ledgers
    done = where.json(capsys, "ledger", "offload", "--before", "1:0", *ledger)
    assert done == {"name": LEDGER, "offloaded": [0], "first_not_offloaded": "1:0",
                    "ledger_dir": where.ledgers}
    status = where.json(capsys, "ledger", "status", *ledger)
    [first] = [r for r in status["ledgers"] if r["ledger_id"] == 0]
    assert first["offload"] == "complete" and first["offload_uuid"], first
    read = where.json(capsys, "ledger", "read", "--ledger", "0", "--first", "1", *ledger)
    assert read == {"name": LEDGER, "ledger_id": 0, "ledger_dir": where.ledgers, "entries": [
        {"entry_id": i, "size": len(ENTRIES[i]),
         "payload_base64": base64.b64encode(ENTRIES[i].encode()).decode()} for i in (1, 2)]}
    swept = where.json(capsys, "ledger", "sweep", "--dry-run", *ledger)
    assert swept["local_copies_deleted"] is None and swept["offload_garbage"]["dry_run"]
    if where.backend == "moto":  # the bucket append created: without --create-bucket, none
        bucket = f"{where.flags[1]}-none"
        missing = [bucket if f == where.flags[1] else f for f in where.flags
                   if f != "--create-bucket"]
        capsys.readouterr()
        assert main(["ledger", "append", "--entry", "x", *ledger, *missing]) == 2
        assert bucket in capsys.readouterr().err


def test_ledger_list_shows_the_open_ledger_as_its_local_copy_holds_it(
        where: Where, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The metadata records counts on close: the open ledger shows what its local
    log holds (not 0 after two appends), and nothing without a local copy."""
    ledger = ["--name", f"{LEDGER}-open", "--ledgers", str(tmp_path / "ledgers")]
    assert where.json(capsys, "ledger", "append", "--entry", "ab", "--entry", "cde",
                      *ledger)["positions"] == ["0:0", "0:1"]
    [row] = where.json(capsys, "ledger", "list", *ledger)["ledgers"]
    assert (row["ledger_id"], row["state"], row["entries"], row["bytes"]) == (0, "open", 2, 5)
    code, out, _ = where.run(capsys, "ledger", "list", *ledger)
    assert code == 0 and re.search(r"^\s*0\s+open\s+2\s+5\s", out, re.M), out
    ledger[-1] = str(tmp_path / "elsewhere")  # another host: no local copy
    [row] = where.json(capsys, "ledger", "list", *ledger)["ledgers"]
    assert (row["state"], row["entries"], row["bytes"]) == ("open", None, None)


def test_ledger_commands_say_where_the_local_copies_are_and_when_they_are_not_here(
        where: Where, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same flags in two directories: the local ledgers are where ledger_dir
    says (on S3, <local_path>/ledgers, relative to the working directory by
    default; here a relative ledger_dir for the local backend too), list and
    status name that directory, a copy the metadata keeps that is not there is
    never ``local``, and append and offload there refuse before taking over."""
    name = f"{LEDGER}-dirs"
    ledger = ["--name", name]
    if where.backend == "local":  # its data dir is absolute: the ledgers' is not
        monkeypatch.setenv("TIEREDSTORE_LEDGER_DIR", "ledgers")
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    appended = where.json(capsys, "ledger", "append", "--entry", "x", "--entry", "y",
                          "--rollover", *ledger)  # ledger 0 closed, 1 open
    here = appended["ledger_dir"]
    assert Path(here).is_absolute() and Path(here).is_relative_to(first), here
    listed = where.json(capsys, "ledger", "list", *ledger)
    assert (listed["ledger_dir"], [(r["local"], r["local_missing"]) for r in
                                   listed["ledgers"]]) == (here, [(True, False)] * 2)

    monkeypatch.chdir(second)  # another directory, the same flags
    elsewhere = str(second / Path(here).relative_to(first))
    listed = where.json(capsys, "ledger", "list", *ledger)
    assert listed["ledger_dir"] == elsewhere
    assert [(r["ledger_id"], r["local"], r["local_missing"]) for r in listed["ledgers"]] == [
        (0, False, True), (1, False, True)], "a copy it cannot see, reported local"
    code, out, _ = where.run(capsys, "ledger", "status", *ledger)
    assert code == 0 and f"local ledgers: {elsewhere}" in out, out
    assert f"missing here: the metadata keeps the local copies of ledger(s) 0, 1, but " \
        f"{elsewhere} does not hold them" in out, out
    code, out, _ = where.run(capsys, "ledger", "list", *ledger)
    assert re.search(r"^\s*0\s+closed\s+2\s+2\s+no\s+missing\s", out, re.M), out
    for action in (["append", "--entry", "z"], ["offload"]):
        code, out, err = where.run(capsys, "ledger", *action, *ledger)
        assert code == 2 and f"the local ledger directory here, {elsewhere}, does not hold " \
            f"them: {action[0]} needs them" in err and "nothing was changed" in err, err
    assert where.json(capsys, "ledger", "list", *ledger)["ledgers"] == listed["ledgers"]
    # named, the first directory's copies are found from here
    moved = where.json(capsys, "ledger", "append", "--entry", "z", "--ledger-dir", here,
                       *ledger)
    assert (moved["positions"], moved["ledger_dir"]) == (["2:0"], here)  # a new owner: a new ledger


def test_ledger_list_without_a_name_lists_the_managed_ledgers(
        where: Where, capsys: pytest.CaptureFixture[str]) -> None:
    """The listing the offload sweep goes by, each managed ledger summed up."""
    listed = where.json(capsys, "ledger", "list", "--ledgers", where.ledgers)
    assert listed["root"] == "managed-ledgers" and listed["ledger_dir"] == where.ledgers
    names = [m["name"] for m in listed["managed_ledgers"]]
    assert LEDGER in names and names == sorted(names), names
    [mine] = [m for m in listed["managed_ledgers"] if m["name"] == LEDGER]
    assert set(mine) == {"name", "ledgers", "first_ledger", "open_ledger", "offloaded",
                         "local", "local_missing"}
    assert mine["first_ledger"] == 0 and mine["local_missing"] == 0, mine
    code, out, err = where.run(capsys, "ledger", "list", "--ledgers", where.ledgers)
    assert code == 0 and re.search(rf"^{re.escape(LEDGER)}\s+\d+\s+0\s", out, re.M), out + err
    assert f"local ledgers: {where.ledgers}" in out


def test_ledger_delete_refuses_a_position_past_the_last_ledger(
        where: Where, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """delete --before past the last ledger + 1 is an error, nothing dropped; sweep
    labels its local copies deleted as ledger ids, not a count."""
    ledger = ["--name", f"{LEDGER}-trim", "--ledgers", str(tmp_path / "ledgers")]
    where.json(capsys, "ledger", "append", "--entry", "x", "--rollover", *ledger)
    where.json(capsys, "ledger", "sweep", "--retention-time", "off", *ledger)  # a take-over
    before = where.json(capsys, "ledger", "list", *ledger)  # ... dropped the empty ledger 1
    assert [r["ledger_id"] for r in before["ledgers"]] == [0], before
    code, out, err = where.run(capsys, "ledger", "delete", "--before", "99", *ledger)
    assert (code, out) == (2, "") and "cannot drop the ledgers before 99: the last ledger " \
        "is 0, so 1 drops every ledger" in err, err
    after = where.json(capsys, "ledger", "list", *ledger)
    # nothing dropped (its owner is the refused command's, which took it over to look)
    assert after["ledgers"] == before["ledgers"], after
    code, out, err = where.run(capsys, "ledger", "sweep", *ledger)
    assert code == 0 and "local copies deleted, of ledgers: -" in out, (out, err)
    assert where.json(capsys, "ledger", "delete", "--before", "1", *ledger) == {
        "name": f"{LEDGER}-trim", "first_ledger": 1, "ledger_dir": str(tmp_path / "ledgers")}


@pytest.mark.parametrize("argv", [["inspect"], ["verify"], ["metrics"], ["gc", "--dry-run"],
                                  ["consume", "--topic", "orders", "--queue", "0"],
                                  ["ledger", "list", "--name", LEDGER]])
def test_a_command_that_reads_an_existing_store_refuses_create_bucket(
        where: Where, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """--create-bucket would do nothing where the store must exist: refused."""
    code, out, err = where.run(capsys, *argv, "--create-bucket")
    name = " ".join(argv[:2] if argv[0] == "ledger" else argv[:1])
    assert (code, out, err) == (2, "", f"tieredstore: --create-bucket: {name} opens an "
                                       "existing store and creates no bucket; create it with "
                                       "produce, demo or ledger append\n")


@pytest.mark.parametrize("flag", ["--prefix", "--cluster"])
def test_ledger_actions_refuse_the_message_store_key_flags(
        where: Where, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """--prefix, --cluster and --broker do not move a managed ledger's keys
    (ledger_root, offload_prefix): a ledger action refuses them, changing nothing."""
    ledger = ["--name", LEDGER, "--ledgers", where.ledgers]
    before = where.json(capsys, "ledger", "list", *ledger)
    for action in (["list"], ["append", "--entry", "x"]):
        code, out, err = where.run(capsys, "ledger", *action, *ledger, flag, "elsewhere")
        assert (code, out) == (2, "") and f"{flag} names the message store's keys, not a " \
            "managed ledger's: those are under ledger_root and offload_prefix" in err, err
    assert where.json(capsys, "ledger", "list", *ledger) == before
    assert "ledger commands refuse it" in " ".join(build_parser().format_help().split())


@pytest.mark.parametrize("argv, error", [
    (["--first", "4"], "cannot read entries [4, 3)"),
    (["--last", "9"], "cannot read entries [0, 10)"),
    (["--first", "-1"], "cannot read entries [-1, 3)"),
    (["--first", "2", "--last", "0"], "cannot read entries [2, 1)"),
])
def test_ledger_read_outside_the_ledger_is_an_error(
        where: Where, capsys: pytest.CaptureFixture[str], argv: list[str], error: str) -> None:
    """Entries the ledger does not hold are an error naming what it holds, in the
    one range notation; reading from its end prints nothing."""
    ledger = ["--name", LEDGER, "--ledgers", where.ledgers, "--ledger", "0"]
    assert where.json(capsys, "ledger", "read", "--first", "3", *ledger)["entries"] == []
    code, out, err = where.run(capsys, "ledger", "read", *argv, *ledger)
    assert (code, out, err) == (2, "", f"tieredstore: managed ledger {LEDGER!r}: ledger 0 "
                                       f"holds entries [0, 3): {error}\n")


def test_ledger_append_of_nothing_is_refused_before_it_takes_over(
        where: Where, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No --entry and nothing on stdin (without --rollover): an error, and the
    managed ledger is not taken over (no new ledger, the owner not fenced)."""
    ledger = ["--name", LEDGER, "--ledgers", where.ledgers]
    before = where.json(capsys, "ledger", "list", *ledger)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, out, err = where.run(capsys, "ledger", "append", *ledger)
    assert (code, out) == (2, "") and "no entries to append" in err, err
    assert where.json(capsys, "ledger", "list", *ledger) == before


def test_metrics_prints_one_pass(where: Where, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --listen: one pass over the bucket, the exporter's per-queue values."""
    done = where.json(capsys, "metrics")
    assert [(q["broker"], q["topic"], q["queue"], q["min_offset"], q["max_offset"],
             q["commit_offset"]) for q in done["queues"]] == [
        ("broker-0", "orders", 0, 0, MESSAGES, MESSAGES),
        ("broker-0", "orders", 1, 0, MESSAGES, MESSAGES)]
    assert all(q["stored_bytes"] > 100 * MESSAGES and q["segments"] >= 2
               and q["oldest_message_timestamp_seconds"]
               <= q["newest_message_timestamp_seconds"] for q in done["queues"]), done
    samples = {(m["name"], tuple(m["labels"].items())): m["value"] for m in done["metrics"]}
    assert samples[("tieredstore_queues", ())] == 2
    assert samples[("tieredstore_bucket_refreshes_total", ())] == 1
    assert samples[("tieredstore_store_requests_total", (("op", "list"),))] > 0
    assert not any(name.startswith("tieredstore_store_requests_total") and op in (
        ("op", "put"), ("op", "delete")) for name, labels in samples for op in labels)
    code, out, err = where.run(capsys, "metrics")
    assert code == 0, err
    assert re.search(r"^broker-0\s+orders\s+1\s+0\s+20\s", out, re.M), out
    assert "queues 2, unreadable 0; the pass made" in out
    code, out, err = where.run(capsys, "metrics", "--min-interval", "5")
    assert (code, out) == (2, "") and "--min-interval applies to --listen only" in err


def test_metrics_counts_a_queue_whose_metadata_is_lost(
        clean_environment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A queue whose heads are gone (its segments in the bucket: what verify
    reports and repair rebuilds) is not healthy: the pass counts it."""
    data = ["--data-dir", str(tmp_path / "d")]
    for queue in ("0", "1"):
        assert main(["produce", "--topic", "o", "--queue", queue, "--count", "5", "-q",
                     *data]) == 0
    heads = [p for p in (tmp_path / "d").rglob("*") if "/meta/heads/o/1/" in str(p)]
    assert heads
    for head in heads:
        head.unlink()
    capsys.readouterr()
    assert main(["verify", *data]) == 1
    capsys.readouterr()
    assert main(["metrics", "--json", *data]) == 0
    samples = {m["name"]: m["value"] for m in json.loads(capsys.readouterr().out)["metrics"]
               if not m["labels"]}
    assert samples["tieredstore_corrupt_queues"] == 1, samples
    assert samples["tieredstore_bucket_refresh_queue_errors_total"] == 1, samples
    assert main(["metrics", *data]) == 0
    assert ", unreadable 1; the pass made" in capsys.readouterr().out


UNKNOWN = [  # (argv, the error); on moto the first two only, to keep the suite quick
    (["consume", "--topic", "nope", "--queue", "0"], "unknown topic 'nope'; topics: orders"),
    (["verify", "--topic", "orders", "--queue", "7"],
     "unknown queue orders/7; topic 'orders' has queues 0, 1"),
    (["query", "--topic", "nope", "--key", "k0"], "unknown topic 'nope'; topics: orders"),
    (["inspect", "--topic", "nope"], "unknown topic 'nope'; topics: orders"),
    (["verify", "--topic", "nope"], "unknown topic 'nope'; topics: orders"),
    (["consume", "--topic", "orders", "--queue", "7"],
     "unknown queue orders/7; topic 'orders' has queues 0, 1"),
    (["inspect", "--topic", "orders", "--queue", "7"],
     "unknown queue orders/7; topic 'orders' has queues 0, 1"),
]


def test_an_unknown_topic_or_queue_is_an_error_naming_it_and_what_exists(
        where: Where, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, error in UNKNOWN[:2] if where.backend == "moto" else UNKNOWN:
        code, out, err = where.run(capsys, *argv, "--json")
        assert (code, out, err) == (2, "", f"tieredstore: {error}\n"), argv


@pytest.mark.parametrize("argv, error", [
    (["--timestamp", "1700000000"], "timestamp: 1700000000 (1970-01-20T16:13:20.000Z) is "),
    (["--key", "k" * 70_000], "keys[0]"),
    (["--tag", "\ud800"], "tags"),
])
def test_produce_refuses_a_bad_message_before_it_claims_the_queue(
        where: Where, capsys: pytest.CaptureFixture[str], argv: list[str], error: str) -> None:
    """A message produce would refuse is refused before the store is opened: the
    queue keeps its writer and head (a live broker is not fenced by a typo)."""
    before = where.json(capsys, "inspect", "--topic", "orders", "--queue", "0")
    code, out, err = where.run(capsys, "produce", "--topic", "orders", "--queue", "0",
                               "--count", "1", *argv)
    assert (code, out) == (2, "") and error in err, err
    after = where.json(capsys, "inspect", "--topic", "orders", "--queue", "0")
    assert [(q["writer"], q["head_version"]) for q in after] == \
        [(q["writer"], q["head_version"]) for q in before]


def test_demo_reports_as_json(where: Where, capsys: pytest.CaptureFixture[str],
                              clean_environment: Path) -> None:
    if where.backend == "local":
        flags = ["--data-dir", str(clean_environment / "demo")]
    else:  # the same bucket: the demo writes under a fresh key prefix of its own
        flags = [*where.flags, "--backend", "s3"]
    capsys.readouterr()
    assert main(["demo", "--messages", "12", "--json", *flags]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["ok"] is True and done["problems"] == [] and done["messages"] == 12
    assert sum(q["checked"] for q in done["queues"]) == 12
    assert all(q["result"] == "ok" and q["bytes"] > 0 and q["segments"] > 0
               for q in done["queues"]), done["queues"]
    assert set(done["requests"]) == {"produce, flush, close", "reopen (recovery), consume",
                                     "verify (read-only)"}


# --- not per backend --------------------------------------------------------------------


def test_flags_override_the_environment_and_the_config_file(
        clean_environment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Defaults < --config file < TIEREDSTORE_* < flags."""
    config = tmp_path / "c.toml"
    config.write_text(f'[backend]\nbackend = "local"\nlocal_path = "{tmp_path / "file"}"\n')
    monkeypatch.setenv("TIEREDSTORE_LOCAL_PATH", str(tmp_path / "env"))
    produce = ["produce", "--topic", "t", "--queue", "0", "--count", "1", "-q",
               "--config", str(config)]
    assert main(produce) == 0
    assert (tmp_path / "env" / "objects").is_dir() and not (tmp_path / "file").exists()
    assert main([*produce, "--data-dir", str(tmp_path / "flag")]) == 0
    assert (tmp_path / "flag" / "objects").is_dir()
    capsys.readouterr()
    assert main([*produce, "--data-dir", "d", "--bucket", "b"]) == 2
    assert "--data-dir names a local store and --bucket an S3 one" in capsys.readouterr().err


def test_a_command_serves_metrics_when_given_the_flag_only(
        clean_environment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration's metrics_port is a broker's: a command run beside it does not
    take it; --metrics-port does (here a port already taken: the error names it)."""
    data = ["--data-dir", str(tmp_path / "d")]
    assert main(["produce", "--topic", "t", "--queue", "0", "--count", "1", "-q", *data]) == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        monkeypatch.setenv("TIEREDSTORE_METRICS_PORT", port)
        capsys.readouterr()
        assert main(["verify", "-q", *data]) == 0
        assert main(["produce", "--topic", "t", "--queue", "0", "--count", "1", "-q",
                     *data]) == 0
        assert main(["verify", "--metrics-port", port, *data]) == 2
        assert f"tieredstore: --metrics-port: cannot serve metrics on 127.0.0.1:{port}" in \
            capsys.readouterr().err


async def _written_before_rebuilt(data: Path, topic: str, queue_id: int) -> None:
    """The queue's head as written before the ``rebuilt`` property: its next
    claim rebuilds it from its segments (reading each one's first record)."""
    from tieredstore.config import load_config
    from tieredstore.metadata import QueueMetadata, QueuePath
    from tieredstore.objectstore import LocalObjectStore
    from tieredstore.store import metadata_root

    async with LocalObjectStore(data, fsync=False) as store:
        meta = await QueueMetadata.open(
            store, QueuePath(metadata_root(load_config(env={})), topic, queue_id),
            writer_id="an older version")
        await meta.set_properties(rebuilt=None)


def test_recover_reports_a_queue_it_could_not_open_and_exits_1(
        clean_environment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A queue recover could not claim (its one commit-log chunk fails its
    CRC32C where the claim's rebuild reads it) is in the report, with why, and
    the exit status is 1: it printed 'no queues' and exited 0."""
    data = ["--data-dir", str(tmp_path / "d")]
    for queue in ("0", "1"):  # 5.2 MB each: one chunk object (direct_commit_size)
        assert main(["produce", "--topic", "o", "--queue", queue, "--count", "2600",
                     "--size", "2000", "-q", *data]) == 0
    [chunk] = [p for p in (tmp_path / "d").rglob("*") if "/o/1/commitlog/" in str(p)
               and p.stat().st_size > 5_000_000]
    body = bytearray(chunk.read_bytes())
    body[len(body) // 2] ^= 0xFF
    body[100] ^= 0xFF  # its first record, which a claim rebuilding the queue reads
    chunk.write_bytes(bytes(body))
    asyncio.run(_written_before_rebuilt(tmp_path / "d", "o", 1))
    capsys.readouterr()
    assert main(["recover", "--json", *data]) == 1
    queues = {q["queue"]: q for q in json.loads(capsys.readouterr().out)["queues"]}
    assert queues[0]["state"] == "ok", queues
    assert queues[1]["state"] == "corrupt" and "CRC32C" in queues[1]["reason"], queues
    assert main(["recover", *data]) == 1
    out = capsys.readouterr().out
    assert "recovered 1 of 2 queues" in out and "CORRUPT o/1:" in out, out


class Terminal(io.TextIOWrapper):
    """Standard input that says it is a terminal."""

    def isatty(self) -> bool:
        return True


TERMINAL_CASES = [  # argv, what it says first, a key of its --json and its value
    (["produce", "--topic", "t", "--queue", "0"],
     "tieredstore produce: reading messages from standard input, one a line; end with Ctrl-D",
     "count", 2),
    (["ledger", "append", "--name", "t"],
     "tieredstore ledger append: reading entries from standard input, one a line; end with "
     "Ctrl-D", "positions", ["0:0", "0:1"]),
]


@pytest.mark.parametrize("case", TERMINAL_CASES, ids=["produce", "ledger-append"])
def test_reading_standard_input_on_a_terminal_says_so(
        clean_environment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, case: tuple[list[str], str, str, Any]) -> None:
    argv, says, key, value = case
    monkeypatch.setattr(sys, "stdin", Terminal(io.BytesIO(b"one\ntwo\n")))
    assert main([*argv, "--data-dir", str(tmp_path / "d"), "--json"]) == 0
    out = capsys.readouterr()
    assert out.err.splitlines()[0].startswith(says)
    assert json.loads(out.out)[key] == value


def test_bench_reports_as_json_and_refuses_store_flags(
        clean_environment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_cmd, "find_suite", lambda: tmp_path)
    monkeypatch.setattr(bench_cmd.subprocess, "run", lambda command, **kw:
                        subprocess.CompletedProcess(command, 3))
    capsys.readouterr()
    assert main(["bench", "--tiny", "--json"]) == 3
    assert json.loads(capsys.readouterr().out) == {
        "command": ["-m", "bench", "--tiny"], "directory": str(tmp_path), "exit_status": 3}
    assert main(["bench", "--bucket", "b"]) == 2
    assert "bench starts its own stores: --bucket does not apply" in capsys.readouterr().err


# Where each command of `tieredstore --help` has its --json parsed on a local directory
# and on moto through flags alone.
COVERED = {
    "produce": "where", "consume": "test_consume_and_query_print_json_lines",
    "query": "test_consume_and_query_print_json_lines",
    "inspect": "test_inspect_lists_every_view_as_json",
    "verify": "test_verify_recover_repair_and_gc_print_one_document",
    "recover": "test_verify_recover_repair_and_gc_print_one_document",
    "repair": "test_verify_recover_repair_and_gc_print_one_document",
    "gc": "test_verify_recover_repair_and_gc_print_one_document",
    "demo": "test_demo_reports_as_json", "metrics": "test_metrics_prints_one_pass",
    "ledger": "test_ledger_actions_print_one_document",
    # starts its own stores: its --json here, store flags refused
    "bench": "test_bench_reports_as_json_and_refuses_store_flags",
    # stats and verify on moto, every job on a local directory
    "spark": "tests/spark/test_jobs.py::test_the_spark_command_reads_a_bucket_named_by_flags",
    # optimize and vacuum --json on a local table
    "table": "tests/spark/test_table.py::"
             "test_optimize_compacts_and_vacuum_deletes_what_no_version_needs",
}


def test_every_command_is_covered_here_or_named() -> None:
    [commands] = [a.choices for a in build_parser()._actions
                  if isinstance(a, argparse._SubParsersAction)]
    assert set(commands) == set(COVERED), "a command without a surface test"
    for test in COVERED.values():
        path, _, name = test.rpartition("::")
        source = Path(__file__).parents[2] / path if path else Path(__file__)
        assert f"def {name}(" in source.read_text(), test


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


# The commands that serve metrics while they run: verify its requests, the others
# a writer's (the ledger's actions that take the managed ledger over: its offload too).
SERVING = {"tieredstore produce", "tieredstore recover", "tieredstore repair",
           "tieredstore verify", "tieredstore ledger append", "tieredstore ledger offload",
           "tieredstore ledger sweep", "tieredstore ledger delete"}

# The ledger's configuration flags, on the action each has an effect in.
LEDGER_FLAGS = {
    "tieredstore ledger offload": {"--offload-threshold-bytes", "--offload-threshold-time"},
    "tieredstore ledger sweep": {"--retention-bytes", "--retention-time", "--deletion-lag"},
    "tieredstore table vacuum": {"--retention-hours"}}  # Delta's retention, not the store's


def test_every_option_has_help_and_no_help_has_markup(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each option of each command, ledger action and job; every help page plain
    text; the same store options everywhere; --metrics-port only where it serves."""
    store_flags = {"--config", "--backend", "--data-dir", "--bucket", "--endpoint", "--prefix",
                   "--region", "--create-bucket", "--json"}
    offered = set()
    for parser in parsers(build_parser()):
        flags = {f for a in parser._actions for f in a.option_strings}
        assert store_flags <= flags, f"{parser.prog}: no {sorted(store_flags - flags)}"
        if "--metrics-port" in flags:
            offered.add(parser.prog)
        managed = {f for f in flags if f.startswith(("--offload-threshold", "--retention",
                                                     "--deletion-lag"))}
        assert managed == LEDGER_FLAGS.get(parser.prog, set()), parser.prog
        text = parser.format_help()
        assert "``" not in text and not re.search(r":[a-z]+:`", text), parser.prog
        missing = [a.option_strings or a.dest for a in parser._actions
                   if not a.help and not isinstance(a, argparse._SubParsersAction)]
        assert not missing, f"{parser.prog}: options without help: {missing}"
    assert offered == SERVING
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"tieredstore {__version__}\n"
