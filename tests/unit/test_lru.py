"""The library's one bounded recency map (page records, ledger handles, read-ahead windows)."""

import pytest

from tieredstore.lru import LRU


def test_lru_drops_the_least_recently_used_and_returns_it() -> None:
    cache: LRU[str, int] = LRU(2)
    assert cache.put("a", 1) == [] and cache.put("b", 2) == []
    assert cache.get("a") == 1
    assert cache.put("c", 3) == [("b", 2)]
    assert cache.get("b") is None and cache.get("a") == 1 and len(cache) == 2
    assert (cache.hits, cache.misses) == (2, 1)
    assert list(cache) == ["c", "a"]


def test_lru_replace_pop_and_clear() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.put("a", 10) == [] and list(cache) == ["b", "a"]
    assert cache.pop("b") == 2 and cache.pop("b") is None and "b" not in cache
    cache.put("c", 3)
    assert cache.clear() == [3, 10] and len(cache) == 0


def test_lru_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="capacity"):
        LRU(0)
