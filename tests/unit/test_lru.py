"""The library's one LRU counting entries (page records, ledger handles,
read-ahead windows); weighing bytes, tests/fetcher/test_policies.py."""

import pytest

from tieredstore.lru import LRU


def test_lru_of_entries_evicts_the_least_recently_used() -> None:
    evicted: list[tuple[str, int]] = []
    cache: LRU[str, int] = LRU(2, on_evict=lambda k, v: evicted.append((k, v)))
    assert cache.put("a", 1) and cache.put("b", 2)
    assert cache.get("a") == 1
    assert cache.put("c", 3) and evicted == [("b", 2)]
    assert cache.get("b") is None and cache.get("a") == 1 and len(cache) == 2
    assert (cache.hits, cache.misses, cache.used) == (2, 1, 2)
    assert list(cache) == ["c", "a"]


def test_lru_replace_and_pop_are_no_evictions() -> None:
    evicted: list[str] = []
    cache: LRU[str, int] = LRU(2, on_evict=lambda k, _: evicted.append(k))
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.put("a", 10) and list(cache) == ["b", "a"]
    assert cache.pop("b") == 2 and cache.pop("b") is None and "b" not in cache
    assert evicted == [] and cache.evictions == 0 and cache.used == 1


def test_lru_of_no_entries_holds_nothing_and_a_negative_budget_is_refused() -> None:
    cache: LRU[str, int] = LRU(0)
    assert not cache.put("a", 1) and len(cache) == 0 and cache.rejected == 1
    with pytest.raises(ValueError, match="budget"):
        LRU(-1)
