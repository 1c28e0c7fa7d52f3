"""Selections from reader options: pure logic, compared with plain predicates."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tieredstore.errors import ConfigError
from tieredstore.objectstore import LocalObjectStore
from tieredstore.spark.options import config_from_options
from tieredstore.spark.read.selection import Selection, Span, selection_from_options
from tieredstore.spark.session import on_loopback
from tieredstore.store import parse_time

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@given(st.integers(-10**9, 10**9), st.integers(-10**6, 10**6))
def test_time_options_keep_exactly_the_millis_from_inclusive_to_exclusive(us: int,
                                                                           ms: int) -> None:
    ms += us // 1000  # near the bound
    when = (EPOCH + dt.timedelta(microseconds=us)).isoformat()
    since = selection_from_options({"time_from": when}).times_ms
    until = selection_from_options({"time_to": when}).times_ms
    assert (ms in since) == (ms * 1000 >= us), (ms, us, when)
    assert (ms in until) == (ms * 1000 < us), (ms, us, when)


def test_times_from_datetimes_strings_and_millis_as_the_store_reads_them() -> None:
    utc = dt.datetime(2023, 11, 14, 22, 13, 20, 1500, tzinfo=dt.UTC)
    plus2 = utc.astimezone(dt.timezone(dt.timedelta(hours=2)))
    assert parse_time(utc) == 1_700_000_000_001_500
    assert parse_time(plus2) == 1_700_000_000_001_500
    assert parse_time(utc.replace(tzinfo=None)) == 1_700_000_000_001_500  # naive: UTC
    assert parse_time("2023-11-14T22:13:20.0015+00:00") == 1_700_000_000_001_500
    assert parse_time("1700000000001") == 1_700_000_000_001_000
    with pytest.raises(ValueError, match="neither ISO 8601 nor milliseconds"):
        parse_time("yesterday")


def test_options_select_from_inclusive_to_exclusive() -> None:
    sel = selection_from_options({"topic": "a, b", "queue_id": "1,3", "offset_from": "10",
                                  "offset_to": "20", "time_from": "1000", "time_to": "2000",
                                  "broker": "b1, b2"})
    assert sel.topics == {"a", "b"} and sel.queue_ids == {1, 3} and sel.brokers == {"b1", "b2"}
    assert sel.offsets == Span(10, 19) and sel.times_ms == Span(1000, 1999)
    assert sel.wants_queue("b1", "a", 3) and not sel.wants_queue("b1", "a", 2)
    assert not sel.wants_queue("b2", "c", 1) and not sel.wants_queue("b3", "a", 3)
    assert sel.wants(19, 1999) and not sel.wants(20, 1500) and not sel.wants(15, 2000)


@pytest.mark.parametrize(("options", "key"), [({"queue_id": "x"}, "queue_id"),
                                              ({"offset_from": "1,2"}, "offset_from"),
                                              ({"time_to": "soon"}, "time_to")])
def test_bad_options_name_their_key(options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        selection_from_options(options)


def test_a_queue_named_twice_in_queue_offsets_is_refused_not_narrowed_to_one_range() -> None:
    """Two ranges for one queue: the reader read only the last one, silently."""
    with pytest.raises(ConfigError, match=r"queue_offsets.*b/t/0 more than once"):
        selection_from_options({"queue_offsets": '[["b", "t", 0, 0, 5], ["b", "t", 0, 10, 20]]'})


def test_contradicting_options_select_nothing() -> None:
    for options in ({"offset_from": "9", "offset_to": "3"},
                    {"time_from": "2000", "time_to": "2000"}):
        sel = selection_from_options(options)
        assert sel.empty and not sel.wants_queue("b", "a", 0), options


def test_segments_are_kept_when_they_may_hold_a_wanted_message() -> None:
    sel = Selection(offsets=Span(100, 199), times_ms=Span(5000, 6000))
    for first, last, begin, end in itertools.product((0, 150, 250), (99, 160, 300),
                                                     (4000, 5500, 7000), (4999, 5500, 8000)):
        if first > last or begin > end:
            continue
        may = first <= 199 and last >= 100 and begin <= 6000 and end >= 5000
        assert sel.wants_segment(first, last, begin, end) == may, (first, last, begin, end)


def test_a_relative_local_path_is_made_absolute_on_the_driver(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    LocalObjectStore(tmp_path / "store")  # an empty store
    monkeypatch.chdir(tmp_path)
    config = config_from_options({"path": "store"})
    assert config.backend == "local" and config.local_path == str(tmp_path / "store")


@pytest.mark.parametrize(("make", "error"), [
    (lambda p: None, "is not a directory"),
    (lambda p: p.mkdir(), "holds no tieredstore local store"),
])
def test_a_path_without_a_store_is_refused_and_nothing_is_created(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Callable[[Path], None],
        error: str) -> None:
    make(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(ConfigError, match=rf"'data' \({tmp_path / 'data'}\) {error}"):
        config_from_options({"path": "data"})
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize(("master", "loopback"), [
    ("local[*]", True), ("local[2]", True), ("spark://127.0.0.1:7077", True),
    ("spark://localhost:7077", True), ("spark://10.0.0.5:7077", False), ("yarn", False),
])
def test_masters_on_this_machine_get_the_loopback_settings(master: str, loopback: bool) -> None:
    assert on_loopback(master) is loopback


def test_the_ledger_reader_takes_its_namespace_from_the_config_keys(tmp_path: Path) -> None:
    from tieredstore.ledger import OffloadNamespace, offload_namespace
    from tieredstore.spark.read.ledger_source import LEDGER_OPTIONS, ledger_selection

    LocalObjectStore(tmp_path)
    options = {"path": str(tmp_path), "offload_prefix": "off", "ledger_id": "3, 5",
               "entry_to": "9"}
    config = config_from_options(options, skip=LEDGER_OPTIONS)
    assert offload_namespace(config) == OffloadNamespace("off")
    selection = ledger_selection(options)
    assert (selection.ledger_ids, selection.entry_from, selection.entry_to) == \
        (frozenset({3, 5}), 0, 9)
    with pytest.raises(ConfigError, match="entry_from"):
        ledger_selection({"entry_from": "x"})
