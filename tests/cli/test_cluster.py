"""The reading commands see the cluster: two brokers write one topic (queue 0 of
``orders`` on each: two queues), and one topic is on one broker only. Without
``--broker`` every command finds both brokers and each ``--json`` row names its
broker; ``--broker`` narrows; a topic on another broker is found, or (narrowed)
the error names the broker that has it. On a local directory and on moto, the
stores written through ``produce --broker`` (the writing commands act on one
broker)."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ACCESS_KEY, SECRET_KEY
from tieredstore.cli import main

A, B = "broker-a", "broker-b"
_buckets = itertools.count()

# broker -> (topic, queue, messages, key)
WRITTEN = {A: [("orders", 0, 5, "ka"), ("orders", 1, 3, "ka"), ("orders", 0, 1, "both")],
           B: [("orders", 0, 4, "kb"), ("only-b", 0, 2, "kb"), ("orders", 0, 1, "both")]}
QUEUES = [(A, "orders", 0), (A, "orders", 1), (B, "only-b", 0), (B, "orders", 0)]
ENDS = {(A, "orders", 0): 6, (A, "orders", 1): 3, (B, "only-b", 0): 2, (B, "orders", 0): 5}


@dataclass
class Cluster:
    flags: list[str]

    def run(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, "-q", *self.flags])
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

    def refused(self, capsys: pytest.CaptureFixture[str], *args: str) -> str:
        code, out, err = self.run(capsys, *args)
        assert (code, out) == (2, ""), f"tieredstore {' '.join(args)}: {code}\n{out}\n{err}"
        return err


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("cluster")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("TIEREDSTORE_"):
                patch.delenv(name)
        patch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        patch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        patch.chdir(work)
        yield work


@pytest.fixture(scope="module", params=["local", "moto"])
def cluster(request: pytest.FixtureRequest, clean: Path) -> Cluster:
    """Two brokers of one cluster, written by ``produce --broker``."""
    if request.param == "local":
        flags = ["--data-dir", str(clean / "data")]
    else:
        server = request.getfixturevalue("moto")
        flags = ["--bucket", f"cluster-{os.getpid()}-{next(_buckets)}", "--endpoint",
                 server.endpoint_url, "--region", "us-east-1"]
    create = ["--create-bucket"] if request.param == "moto" else []
    for broker, writes in WRITTEN.items():
        for topic, queue, count, key in writes:
            out = io.StringIO()
            sys.stdout, saved = out, sys.stdout
            try:
                code = main(["produce", "--broker", broker, "--topic", topic, "--queue",
                             str(queue), "--count", str(count), "--key", key, "--json",
                             *create, *flags])
            finally:
                sys.stdout = saved
            assert code == 0, out.getvalue()
            create = []
    return Cluster(flags)


def test_inspect_lists_every_brokers_queues_and_broker_narrows(
        cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    queues = cluster.json(capsys, "inspect", "queues")
    assert [(q["broker"], q["topic"], q["queue"], q["max_offset"]) for q in queues] == [
        (*q, ENDS[q]) for q in QUEUES]
    topics = cluster.json(capsys, "inspect", "topics")
    assert [(t["broker"], t["topic"], t["queues"], t["messages"]) for t in topics] == [
        (A, "orders", 2, 9), (B, "only-b", 1, 2), (B, "orders", 1, 5)]
    segments = cluster.json(capsys, "inspect", "segments", "--topic", "orders", "--queue", "0")
    assert {s["broker"] for s in segments} == {A, B}
    chunks = cluster.json(capsys, "inspect", "chunks", "--topic", "orders", "--queue", "0")
    assert {c["broker"] for c in chunks} == {A, B}
    # A text table has a broker column.
    code, out, _ = cluster.run(capsys, "inspect", "queues")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["broker", "topic", "queue"]
    assert re.search(r"^broker-b\s+only-b\s+0\s", out, re.M), out
    # --broker narrows, to one or a list.
    narrowed = cluster.json(capsys, "inspect", "queues", "--broker", B)
    assert [(q["broker"], q["topic"], q["queue"]) for q in narrowed] == QUEUES[2:]
    both = cluster.json(capsys, "inspect", "queues", "--broker", f"{B},{A}")
    assert [(q["broker"], q["topic"], q["queue"]) for q in both] == QUEUES


def test_inspect_brokers_lists_each_brokers_writer(
        cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    rows = cluster.json(capsys, "inspect", "brokers")
    assert [(r["broker"], r["state"]) for r in rows] == [(A, "closed"), (B, "closed")]
    assert all(r["writer"] and r["last_seen_ms"] for r in rows), rows
    code, out, _ = cluster.run(capsys, "inspect", "brokers")
    assert code == 0 and out.splitlines() == [
        line for line in out.splitlines() if line.startswith(("broker broker-a: closed writer",
                                                              "broker broker-b: closed writer"))]
    assert len(out.splitlines()) == 2
    [only] = cluster.json(capsys, "inspect", "brokers", "--broker", B)
    assert only["broker"] == B and only["writer"]


def test_verify_checks_every_brokers_queues(cluster: Cluster,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    report = cluster.json(capsys, "verify")
    assert [(q["broker"], q["topic"], q["queue"], q["messages"]) for q in report["queues"]] \
        == [(*q, ENDS[q]) for q in QUEUES]
    assert (report["error_count"], report["messages"]) == (0, sum(ENDS.values()))
    narrowed = cluster.json(capsys, "verify", "--broker", A, "--topic", "orders")
    assert [(q["broker"], q["queue"]) for q in narrowed["queues"]] == [(A, 0), (A, 1)]
    one = cluster.json(capsys, "verify", "--topic", "only-b")
    assert [(q["broker"], q["topic"]) for q in one["queues"]] == [(B, "only-b")]


def test_consume_finds_the_broker_of_a_queue_and_asks_when_two_have_it(
        cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    got = cluster.lines(capsys, "consume", "--topic", "only-b", "--queue", "0")
    assert [(m["broker"], m["topic"], m["queue"], m["offset"]) for m in got] == [
        (B, "only-b", 0, 0), (B, "only-b", 0, 1)]
    err = cluster.refused(capsys, "consume", "--topic", "orders", "--queue", "0")
    assert "queue orders/0 is on brokers broker-a, broker-b" in err and "--broker" in err, err
    for broker in (A, B):
        got = cluster.lines(capsys, "consume", "--topic", "orders", "--queue", "0",
                            "--broker", broker)
        assert [(m["broker"], m["offset"]) for m in got] == [
            (broker, o) for o in range(ENDS[broker, "orders", 0])]
    # Queue 1 of orders is broker-a's alone: found without --broker.
    got = cluster.lines(capsys, "consume", "--topic", "orders", "--queue", "1")
    assert {m["broker"] for m in got} == {A} and len(got) == 3


def test_query_finds_a_key_on_either_broker(cluster: Cluster,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    on_a = cluster.lines(capsys, "query", "--topic", "orders", "--key", "ka")
    assert sorted((m["broker"], m["queue"], m["offset"]) for m in on_a) == [
        (A, 0, o) for o in range(5)] + [(A, 1, o) for o in range(3)]
    on_b = cluster.lines(capsys, "query", "--topic", "orders", "--key", "kb")
    assert [(m["broker"], m["queue"], m["offset"]) for m in on_b] == [
        (B, 0, o) for o in range(4)]
    both = cluster.lines(capsys, "query", "--topic", "orders", "--key", "both")
    assert sorted((m["broker"], m["offset"]) for m in both) == [(A, 5), (B, 4)]
    narrowed = cluster.lines(capsys, "query", "--topic", "orders", "--key", "both",
                             "--broker", B)
    assert [(m["broker"], m["offset"]) for m in narrowed] == [(B, 4)]
    code, out, _ = cluster.run(capsys, "query", "--topic", "only-b", "--key", "kb")
    assert code == 0 and [line.split("\t")[:3] for line in out.splitlines()] == [
        [B, "0", "0"], [B, "0", "1"]]


def test_metrics_has_every_brokers_series_and_writer(
        cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    done = cluster.json(capsys, "metrics")
    assert [(q["broker"], q["topic"], q["queue"], q["max_offset"]) for q in done["queues"]] \
        == [(*q, ENDS[q]) for q in QUEUES]
    seen = [m for m in done["metrics"]
            if m["name"] == "tieredstore_broker_writer_last_seen_timestamp_seconds"]
    assert [(m["labels"]["broker"], m["labels"]["state"]) for m in seen] == [
        (A, "closed"), (B, "closed")]
    totals = {m["name"]: m["value"] for m in done["metrics"] if not m["labels"]}
    assert totals["tieredstore_queues"] == len(QUEUES)
    narrowed = cluster.json(capsys, "metrics", "--broker", A)
    assert {q["broker"] for q in narrowed["queues"]} == {A}
    code, out, _ = cluster.run(capsys, "metrics")
    assert code == 0 and re.search(r"^broker-b\s+only-b\s+0\s+0\s+2\s", out, re.M), out


def test_gc_reports_name_their_broker(cluster: Cluster,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Each produce wrote its broker's log: the entries below its newest are
    log fences or spent, of both brokers (a dry run deletes nothing)."""
    found = cluster.json(capsys, "gc", "--dry-run", "--safety-age", "0")["found"]
    assert {g["broker"] for g in found if "/log/" in g["key"]} == {A, B}, found
    assert all(f"/{g['broker']}/" in g["key"] for g in found if g["broker"]), found
    narrowed = cluster.json(capsys, "gc", "--dry-run", "--safety-age", "0", "--broker", B)
    assert {g["broker"] for g in narrowed["found"] if "/log/" in g["key"]} == {B}


@pytest.mark.parametrize("argv", [
    ["inspect", "--topic", "only-b"], ["verify", "--topic", "only-b"],
    ["consume", "--topic", "only-b", "--queue", "0"], ["query", "--topic", "only-b",
                                                       "--key", "kb"]])
def test_a_topic_on_another_broker_is_found_or_named(
        cluster: Cluster, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = cluster.run(capsys, *argv)
    assert code == 0 and out, err
    err = cluster.refused(capsys, *argv, "--broker", A)
    assert "unknown topic 'only-b'; topics: orders; broker broker-b has it" in err, err


@pytest.mark.parametrize("argv", [["inspect"], ["inspect", "brokers"], ["verify"],
                                  ["metrics"], ["gc", "--dry-run"],
                                  ["consume", "--topic", "orders", "--queue", "1"],
                                  ["query", "--topic", "orders", "--key", "ka"]])
def test_a_broker_the_cluster_lacks_is_an_error(
        cluster: Cluster, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    err = cluster.refused(capsys, *argv, "--broker", "broker-c")
    assert "unknown broker 'broker-c'; brokers: broker-a, broker-b" in err, err
    err = cluster.refused(capsys, *argv, "--broker", "a/b")
    assert "--broker: invalid broker 'a/b'" in err, err


def test_an_unknown_topic_names_the_clusters_topics(
        cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    err = cluster.refused(capsys, "inspect", "--topic", "nope")
    assert "unknown topic 'nope'; topics: only-b, orders" in err, err
    err = cluster.refused(capsys, "consume", "--topic", "orders", "--queue", "7")
    assert "unknown queue orders/7; topic 'orders' has queues 0, 1" in err, err
