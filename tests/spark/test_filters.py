"""Spark's pushed filters as selections, the warning, and the reader of PySpark's
pushdown planning: compared with plain predicates over rows."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import datasource as sd

from tests.spark.conftest import BuiltStore
from tieredstore.spark.read.filters import selection_from_filters, selection_options
from tieredstore.spark.read.pushdown import in_pushdown_planning, unpushed_warning
from tieredstore.spark.read.selection import Selection, Span, selection_from_options

pytestmark = [pytest.mark.spark]

T0_MS = 1_700_000_000_000
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
RANGES = {sd.GreaterThan: "__gt__", sd.GreaterThanOrEqual: "__ge__", sd.LessThan: "__lt__",
          sd.LessThanOrEqual: "__le__"}

topics = st.sampled_from(["a", "b", "c"])
queue_ids = st.integers(-1, 3)
offsets = st.integers(-2, 6)
times_ms = st.integers(T0_MS - 2, T0_MS + 4)
# Filter times in microseconds near whole milliseconds, with either time zone.
times = st.builds(lambda ms, us, tz: (EPOCH + dt.timedelta(milliseconds=ms, microseconds=us))
                  .astimezone(tz), times_ms, st.sampled_from([0, 0, 1, 999, -1]),
                  st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=-5))]))
VALUES = {"topic": topics, "queue_id": queue_ids, "offset": offsets, "store_timestamp": times}


@st.composite
def filters(draw: st.DrawFn, exact: bool = False) -> sd.Filter:
    column = draw(st.sampled_from(sorted(VALUES)))
    values = VALUES[column]
    kinds: list[Any] = [sd.EqualTo, sd.EqualNullSafe, sd.In]
    if column in ("offset", "store_timestamp"):
        kinds += list(RANGES)
        if exact:
            kinds.remove(sd.In)
    elif not exact:
        kinds += list(RANGES)
    kind = draw(st.sampled_from(kinds))
    if kind is sd.In:
        return sd.In((column,), tuple(draw(st.lists(values, max_size=3))))
    return kind((column,), draw(values))


Row = tuple[str, int, int, int]  # topic, queue id, offset, store time ms
rows = st.tuples(topics, queue_ids, offsets, times_ms)


def passes(f: sd.Filter, row: Row) -> bool:
    """The filter evaluated on a row, as SQL would: the oracle."""
    topic, queue_id, offset, ms = row
    name = f.attribute[0]  # type: ignore[attr-defined]
    value: Any = {"topic": topic, "queue_id": queue_id, "offset": offset,
                  "store_timestamp": EPOCH + dt.timedelta(milliseconds=ms)}[name]
    if isinstance(f, sd.EqualTo | sd.EqualNullSafe):
        return bool(value == f.value)
    if isinstance(f, sd.In):
        return value in f.value
    return bool(getattr(value, RANGES[type(f)])(f.value))  # type: ignore[attr-defined]


def wanted(selection: Selection, row: Row) -> bool:
    return selection.wants_queue("broker-0", row[0], row[1]) and selection.wants(row[2], row[3])


@given(st.lists(filters(), max_size=4), rows)
def test_a_row_that_passes_every_filter_is_selected(fs: list[sd.Filter], row: Row) -> None:
    if all(passes(f, row) for f in fs):
        assert wanted(selection_from_filters(fs), row), (fs, row)


@given(st.lists(filters(exact=True), max_size=4), rows)
def test_equalities_and_bounds_select_exactly_the_rows_that_pass(fs: list[sd.Filter],
                                                                 row: Row) -> None:
    assert wanted(selection_from_filters(fs), row) == all(passes(f, row) for f in fs), (fs, row)


@given(st.lists(filters(), max_size=4))
def test_options_written_from_a_selection_read_back_as_it(fs: list[sd.Filter]) -> None:
    selection = selection_from_filters(fs)
    if selection.empty:  # nothing: an empty list is no option at all
        return
    assert selection_from_options(selection_options(selection)) == selection, fs


def test_other_filters_and_columns_select_everything() -> None:
    others = [sd.IsNotNull(("offset",)), sd.Not(sd.EqualTo(("topic",), "a")),
              sd.StringStartsWith(("topic",), "a"), sd.EqualTo(("body",), b"x"),
              sd.EqualTo(("properties", "n"), "1"), sd.GreaterThan(("offset",), 1.5)]
    assert selection_from_filters(others) == Selection()


def test_filters_intersect_with_the_reader_options() -> None:
    options = selection_from_options({"topic": "a,b", "offset_from": "10"})
    narrowed = options.intersect(selection_from_filters([
        sd.In(("topic",), ("b", "c")), sd.LessThan(("offset",), 20), sd.EqualTo(("queue_id",), 2)]))
    assert selection_options(narrowed) == {"topic": "b", "queue_id": "2",
                                           "offset_from": "10", "offset_to": "20"}


def test_the_warning_names_the_columns_and_the_options_that_select_the_same() -> None:
    at = EPOCH + dt.timedelta(milliseconds=T0_MS)
    warning = unpushed_warning(Selection(), [sd.IsNotNull(("offset",)),
                                             sd.GreaterThanOrEqual(("offset",), 200),
                                             sd.EqualTo(("topic",), "audit"),
                                             sd.LessThan(("store_timestamp",), at)])
    assert warning is not None
    assert "filters on topic, offset, store_timestamp" in warning, warning
    assert f"topic='audit', offset_from='200', time_to='{T0_MS}'" in warning, warning


def test_no_warning_when_the_options_select_no_more_or_no_filter_prunes() -> None:
    options = selection_from_options({"offset_from": "200"})
    assert unpushed_warning(options, [sd.GreaterThanOrEqual(("offset",), 200)]) is None
    assert unpushed_warning(options, [sd.GreaterThan(("offset",), 100)]) is None
    assert unpushed_warning(Selection(), [sd.IsNotNull(("offset",)),
                                          sd.EqualTo(("tags",), "x")]) is None


def test_pushdown_planning_is_recognised_by_its_worker_module_on_the_stack() -> None:
    assert not in_pushdown_planning()
    seen: dict[str, bool] = {}
    code = compile("seen['in'] = in_pushdown_planning()",
                   "/any/pyspark/sql/worker/data_source_pushdown_filters.py", "exec")
    exec(code, {"seen": seen, "in_pushdown_planning": in_pushdown_planning})
    assert seen == {"in": True}


def test_the_planning_reader_pushes_nothing_keeps_nothing_and_warns(
        merged_store: BuiltStore, caplog: pytest.LogCaptureFixture) -> None:
    from tieredstore.spark.read.reader import FilterSeeingReader, TieredStoreReader

    plain = TieredStoreReader(merged_store.config, Selection())
    reader = FilterSeeingReader(merged_store.config, Selection())
    before = dict(vars(reader))
    fs: list[sd.Filter] = [sd.IsNotNull(("offset",)), sd.GreaterThanOrEqual(("offset",), 200),
                        sd.EqualTo(("topic",), "audit")]
    with caplog.at_level(logging.WARNING, "tieredstore.spark.read.reader"):
        back = list(reader.pushFilters(fs))
    assert [id(f) for f in back] == [id(f) for f in fs]  # every one applied by Spark again
    assert vars(reader) == before
    assert reader.partitions() == plain.partitions()
    assert "topic='audit', offset_from='200'" in caplog.text, caplog.text


def test_intersect_keeps_per_queue_offsets_and_narrows_them() -> None:
    per_queue = selection_from_options(
        {"queue_offsets": '[["b", "a", 0, 5, 50], ["b", "a", 1, 0, 9]]'})
    narrowed = per_queue.intersect(selection_from_filters([sd.GreaterThanOrEqual(("offset",), 7)]))
    assert narrowed.queue_offsets == per_queue.queue_offsets
    assert narrowed.for_queue("b", "a", 0).offsets == Span(7, 49)  # closed: offsets 7..49
    assert narrowed.for_queue("b", "a", 1).offsets == Span(7, 8)
    both = per_queue.intersect(
        selection_from_options({"queue_offsets": '[["b", "a", 0, 10, 99]]'}))
    assert both.queue_offsets is not None and set(both.queue_offsets) == {("b", "a", 0)}
    assert both.queue_offsets["b", "a", 0] == Span(10, 49)
