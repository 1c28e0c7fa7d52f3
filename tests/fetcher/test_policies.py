"""The pure cache policies, driven by a counting fake fetcher (no store, no IO)."""

from __future__ import annotations

from collections import Counter, OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tieredstore.fetcher import ReadAheadWindow
from tieredstore.lru import LRU
from tieredstore.segment.layout import ChunkRef, SegmentLayout

UNIT = 100


class CountingFetcher:
    """A fake fetcher: bytes of a known size per key, counting every call."""

    def __init__(self, size: int = UNIT) -> None:
        self.size = size
        self.calls: Counter[object] = Counter()

    def __call__(self, key: object) -> bytes:
        self.calls[key] += 1
        return bytes([hash(key) & 0xFF]) * self.size

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def layout_of(n: int, unit: int = UNIT) -> SegmentLayout:
    return SegmentLayout(ChunkRef(i * unit, unit, f"chunk-{i}") for i in range(n))


# --- LRU, weighing bytes (the fetcher's memory tier) ---------------------------------


def test_lru_budget_counts_bytes_not_entries() -> None:
    lru: LRU[str, bytes] = LRU(1000, weigh=len)
    for i in range(100):
        assert lru.put(f"small{i}", b"x" * 10)
    assert len(lru) == 100 and lru.used == 1000
    assert lru.put("big", b"y" * 500)
    assert lru.used <= 1000
    assert len(lru) == 51, "a 500-byte entry must push out fifty 10-byte ones"
    assert lru.evictions == 50 and lru.evicted == 500


def test_lru_entry_bigger_than_budget_is_not_cached_and_evicts_nothing() -> None:
    lru: LRU[str, bytes] = LRU(100, weigh=len)
    lru.put("a", b"a" * 60)
    assert not lru.put("huge", b"h" * 101)
    assert "huge" not in lru and "a" in lru
    assert lru.rejected == 1 and lru.evictions == 0


def test_lru_get_refreshes_recency_and_counts() -> None:
    evicted: list[str] = []
    lru: LRU[str, bytes] = LRU(300, weigh=len, on_evict=lambda k, _: evicted.append(k))
    for key in "abc":
        lru.put(key, key.encode() * 100)
    assert lru.get("a") is not None  # a is now the most recent
    assert lru.get("zz") is None
    lru.put("d", b"d" * 100)
    assert evicted == ["b"], f"least recently used was b, evicted {evicted}"
    assert (lru.hits, lru.misses) == (1, 1)
    assert list(lru) == ["c", "a", "d"]


def test_lru_fetch_calls_the_fetcher_once_per_key_while_cached() -> None:
    fetch = CountingFetcher()
    lru: LRU[int, bytes] = LRU(3 * UNIT, weigh=len)
    for _ in range(5):
        for key in (1, 2, 3):
            assert len(lru.fetch(key, fetch)) == UNIT
    assert fetch.calls == {1: 1, 2: 1, 3: 1}
    lru.fetch(4, fetch)  # evicts 1, the least recently used
    lru.fetch(1, fetch)
    assert fetch.calls[1] == 2 and lru.hits == 12 and lru.misses == 5


def test_lru_pop_and_peek_do_not_count() -> None:
    lru: LRU[str, bytes] = LRU(100, weigh=len)
    lru.put("a", b"1234")
    assert lru.peek("a") == b"1234" and lru.pop("a") == b"1234"
    assert lru.used == 0 and (lru.hits, lru.misses, lru.evictions) == (0, 0, 0)


@settings(max_examples=200, deadline=None)
@given(
    budget=st.integers(0, 400),
    ops=st.lists(st.tuples(st.sampled_from(["put", "get", "pop"]), st.integers(0, 9),
                           st.integers(0, 150)), max_size=60),
)
def test_lru_matches_a_plain_model(budget: int, ops: list[tuple[str, int, int]]) -> None:
    """Compare with an OrderedDict model written independently of the class."""
    lru: LRU[int, bytes] = LRU(budget, weigh=len)
    model: OrderedDict[int, bytes] = OrderedDict()
    for op, key, size in ops:
        if op == "put":
            value = bytes([key]) * size
            model.pop(key, None)
            if size <= budget:
                while sum(map(len, model.values())) + size > budget:
                    model.popitem(last=False)
                model[key] = value
            lru.put(key, value)
        elif op == "get":
            expected = model.get(key)
            if expected is not None:
                model.move_to_end(key)
            assert lru.get(key) == expected
        else:
            assert lru.pop(key) == model.pop(key, None)
        assert list(lru) == list(model)
        assert lru.used == sum(map(len, model.values())) <= budget


# --- ReadAheadWindow --------------------------------------------------------------------


def positions(units: list[ChunkRef]) -> list[int]:
    return [u.position // UNIT for u in units]


def test_window_grows_by_one_per_new_unit_up_to_the_cap() -> None:
    layout = layout_of(40)
    window = ReadAheadWindow(2, 5)
    seen = []
    for i in range(8):
        advised = window.advise(layout, i * UNIT, UNIT)
        seen.append(window.window)
        assert positions(advised) == list(range(i + 1, i + 1 + window.window))
    assert seen == [2, 3, 4, 5, 5, 5, 5, 5]


def test_window_does_not_grow_within_one_unit() -> None:
    layout = layout_of(10)
    window = ReadAheadWindow(2, 8)
    for offset in range(0, UNIT, 10):  # ten small reads inside unit 0
        assert positions(window.advise(layout, offset, 10)) == [1, 2]
    assert window.window == 2
    window.advise(layout, UNIT, 10)  # into unit 1
    assert window.window == 3


def test_random_jump_closes_the_window_and_next_sequential_read_reopens_at_base() -> None:
    layout = layout_of(40)
    window = ReadAheadWindow(2, 8)
    for i in range(5):
        window.advise(layout, i * UNIT, UNIT)
    assert window.window == 6
    assert window.advise(layout, 30 * UNIT + 7, 10) == []  # jump
    assert window.window == 0 and window.jumps == 1
    assert positions(window.advise(layout, 30 * UNIT + 17, 10)) == [31, 32]
    assert window.window == 2


def test_first_read_is_sequential_only_at_the_start_of_the_segment() -> None:
    layout = layout_of(10)
    assert positions(ReadAheadWindow(2, 8).advise(layout, 0, 10)) == [1, 2]
    assert ReadAheadWindow(2, 8).advise(layout, 5 * UNIT, 10) == []


def test_repeated_read_neither_grows_nor_opens_the_window() -> None:
    layout = layout_of(10)
    window = ReadAheadWindow(2, 8)
    for _ in range(3):
        assert window.advise(layout, 4 * UNIT + 50, 10) == []
    assert window.window == 0 and window.jumps == 1


def test_overlapping_reread_of_a_batch_tail_is_sequential() -> None:
    layout = layout_of(10)
    window = ReadAheadWindow(2, 8)
    window.advise(layout, 0, 150)
    assert positions(window.advise(layout, 120, 100)) == [3, 4, 5]


def test_window_never_goes_beyond_the_layout() -> None:
    layout = layout_of(4)
    window = ReadAheadWindow(8, 8)
    assert positions(window.advise(layout, 0, UNIT)) == [1, 2, 3]
    assert positions(window.advise(layout, 2 * UNIT, 2 * UNIT)) == []


def test_base_zero_disables_read_ahead() -> None:
    layout = layout_of(10)
    window = ReadAheadWindow(0, 0)
    for i in range(5):
        assert window.advise(layout, i * UNIT, UNIT) == []


def test_bad_window_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="base"):
        ReadAheadWindow(3, 2)


# --- both policies together, as the fetcher drives them ------------------------------


def simulate(reads: list[tuple[int, int]], *, units: int, budget_units: int,
             base: int = 2, cap: int = 8) -> tuple[CountingFetcher, LRU[int, bytes]]:
    """A reader over a layout: LRU lookups, fetch on miss, then prefetch what the
    window advises (as far as the budget has room beside the units just read)."""
    layout = layout_of(units)
    fetch = CountingFetcher()
    lru: LRU[int, bytes] = LRU(budget_units * UNIT, weigh=len)
    window = ReadAheadWindow(base, cap)
    for position, length in reads:
        read_units = {s.unit.position // UNIT for s in layout.slices(position, length)}
        for index in sorted(read_units):
            lru.fetch(index, fetch)
        need = len(read_units) * UNIT
        for unit in window.advise(layout, position, length):
            need += UNIT
            if need > lru.budget:
                break
            index = unit.position // UNIT
            if index not in lru:
                lru.put(index, fetch(index))
        assert lru.used <= lru.budget
    return fetch, lru


def test_sequential_scan_fetches_every_unit_once_and_hits_after_the_first() -> None:
    reads = [(p, 25) for p in range(0, 20 * UNIT, 25)]
    fetch, lru = simulate(reads, units=20, budget_units=64)
    assert fetch.calls == {i: 1 for i in range(20)}, f"fetched {dict(fetch.calls)}"
    assert lru.misses == 1, "only the first unit may miss; read-ahead serves the rest"


def test_random_reads_fetch_only_what_they_touch() -> None:
    reads = [(13 * UNIT + 5, 10), (2 * UNIT + 40, 10), (17 * UNIT, 10), (13 * UNIT + 5, 10)]
    fetch, _ = simulate(reads, units=20, budget_units=64)
    assert fetch.calls == {13: 1, 2: 1, 17: 1}


def test_small_budget_cuts_the_window_without_evicting_the_read_unit() -> None:
    reads = [(i * UNIT, UNIT) for i in range(12)]
    fetch, lru = simulate(reads, units=12, budget_units=3)
    assert fetch.calls == {i: 1 for i in range(12)}, f"fetched {dict(fetch.calls)}"
    assert 11 in lru
