"""MemoryTier against a plain model (a dict and a recency list): a Hypothesis state machine.

Random puts (prefetched or not, committed or not, some larger than the whole
budget, some moving a unit to another segment), gets, touches, forgets,
drop-behind steps and clears go to a small :class:`MemoryTier` and to the
model. After every step the tier must hold exactly the model's units, in the
model's recency order, with the same segment, unread and committed marks; its
byte count must match and never exceed the budget; every method must report
the same events (wasted prefetches, units dropped behind, read-ahead hits);
and :meth:`MemoryTier.check` must find its indexes consistent. A forgotten
segment must leave nothing behind in any index.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tieredstore.fetcher.memory import MemoryTier

PATHS = ("a", "b", "c")
keys = st.integers(0, 5)
paths = st.sampled_from(PATHS)


def payload(key: int, size: int) -> bytes:
    return bytes([key]) * size


class Model:
    """What a memory tier should hold, the obvious way."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.order: list[int] = []  # least recently used first
        self.data: dict[int, bytes] = {}
        self.owner: dict[int, str] = {}
        self.unread: set[int] = set()
        self.committed: set[int] = set()
        self.behind: dict[str, list[tuple[int, int]]] = {}

    @property
    def nbytes(self) -> int:
        return sum(len(d) for d in self.data.values())

    def remove(self, key: int) -> None:
        if key in self.data:
            self.order.remove(key)
            del self.data[key]
        self.owner.pop(key, None)
        self.unread.discard(key)
        self.committed.discard(key)

    def put(self, path: str, key: int, data: bytes, prefetched: bool, committed: bool) -> int:
        owner = self.owner.get(key)
        if key in self.data:
            self.order.remove(key)
            del self.data[key]
        if len(data) > self.budget:
            self.remove(key)
            return 0
        wasted = 0
        while self.nbytes + len(data) > self.budget:
            victim = self.order[0]
            wasted += victim in self.unread
            self.remove(victim)
        self.data[key] = data
        self.order.append(key)
        if owner != path:
            self.unread.discard(key)
            self.committed.discard(key)
            self.owner[key] = path
        if prefetched:
            self.unread.add(key)
        else:
            self.unread.discard(key)
        if committed:
            self.committed.add(key)
        return wasted

    def get(self, key: int) -> tuple[bytes, bool] | None:
        if key not in self.data:
            return None
        self.order.remove(key)
        self.order.append(key)
        first = key in self.unread
        self.unread.discard(key)
        return self.data[key], first

    def touch(self, key: int) -> bool:
        if key not in self.data:
            return False
        self.order.remove(key)
        self.order.append(key)
        return True

    def forget(self, path: str) -> int:
        mine = [k for k, p in self.owner.items() if p == path]
        wasted = sum(k in self.unread for k in mine)
        for key in mine:
            self.remove(key)
        self.behind.pop(path, None)
        return wasted

    def drop_behind(self, path: str, position: int, read: list[tuple[int, int]]) -> int:
        previous = self.behind.pop(path, [])
        dropped = 0
        for key, end in previous:
            if end <= position and key in self.owner and key not in self.committed:
                self.remove(key)
                dropped += 1
        kept = {k: e for k, e in previous if e > position}
        kept.update(read)
        self.behind[path] = list(kept.items())
        return dropped


class MemoryTierMachine(RuleBasedStateMachine):
    tier: MemoryTier[int, str]
    model: Model

    @initialize(budget=st.integers(0, 60))
    def start(self, budget: int) -> None:
        self.tier = MemoryTier(budget)
        self.model = Model(budget)

    @rule(path=paths, key=keys, size=st.integers(0, 25), prefetched=st.booleans(),
          committed=st.booleans())
    def put(self, path: str, key: int, size: int, prefetched: bool, committed: bool) -> None:
        data = payload(key, size)
        got = self.tier.put(path, key, data, prefetched=prefetched, committed=committed)
        assert got == self.model.put(path, key, data, prefetched, committed)

    @rule(key=keys)
    def get(self, key: int) -> None:
        assert self.tier.get(key) == self.model.get(key)

    @rule(key=keys)
    def touch(self, key: int) -> None:
        assert self.tier.touch(key) == self.model.touch(key)

    @rule(path=paths)
    def forget(self, path: str) -> None:
        assert self.tier.forget(path) == self.model.forget(path)
        assert not self.tier.units_of(path)
        assert all(self.tier.owner(k) != path for k in self.tier)
        assert self.tier.behind(path) == []

    @rule(path=paths)
    def forget_reader(self, path: str) -> None:
        self.tier.forget_reader(path)
        self.model.behind.pop(path, None)

    @rule(path=paths, position=st.integers(0, 12),
          read=st.lists(st.tuples(keys, st.integers(0, 12)), max_size=3))
    def drop_behind(self, path: str, position: int, read: list[tuple[int, int]]) -> None:
        got = self.tier.drop_behind(path, position, read)
        assert got == self.model.drop_behind(path, position, read)

    @rule()
    def clear(self) -> None:
        self.tier.clear()
        self.model = Model(self.model.budget)

    @invariant()
    def same_as_the_model(self) -> None:
        self.tier.check()
        model = self.model
        assert list(self.tier) == model.order
        assert len(self.tier) == len(model.order)
        assert {k: self.tier.owner(k) for k in self.tier} == model.owner
        assert set(self.tier.unread) == model.unread
        assert set(self.tier.committed) == model.committed
        for path in PATHS:
            assert self.tier.units_of(path) == {k for k, p in model.owner.items() if p == path}
            assert self.tier.behind(path) == model.behind.get(path, [])

    @invariant()
    def within_the_budget(self) -> None:
        assert self.tier.nbytes == self.model.nbytes <= self.tier.budget


MemoryTierMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40,
                                               deadline=None)
test_memory_tier_matches_the_model = MemoryTierMachine.TestCase


# --- examples ---------------------------------------------------------------------------


def test_evicting_an_unread_prefetch_is_reported_as_waste() -> None:
    tier: MemoryTier[int, str] = MemoryTier(20)
    tier.put("a", 1, payload(1, 10), prefetched=True)
    tier.put("a", 2, payload(2, 10))
    assert tier.put("a", 3, payload(3, 10)) == 1  # unit 1 evicted, never read
    assert tier.get(2) == (payload(2, 10), False)
    assert tier.put("a", 4, payload(4, 10), prefetched=True) == 0  # unit 3 out, it was read
    assert tier.get(4) == (payload(4, 10), True)  # a read-ahead hit, once
    assert tier.get(4) == (payload(4, 10), False)


def test_forget_drops_the_segment_and_counts_its_unread_units() -> None:
    tier: MemoryTier[int, str] = MemoryTier(100)
    tier.put("a", 1, payload(1, 5), prefetched=True)
    tier.put("a", 2, payload(2, 5), committed=True)
    tier.put("b", 3, payload(3, 5))
    tier.drop_behind("a", 0, [(2, 5)])
    assert tier.forget("a") == 1
    assert list(tier) == [3] and tier.nbytes == 5
    assert not tier.units_of("a") and tier.behind("a") == [] and not tier.committed
    tier.check()


def test_drop_behind_keeps_committed_units_and_what_is_ahead() -> None:
    tier: MemoryTier[int, str] = MemoryTier(100)
    for key in range(4):
        tier.put("a", key, payload(key, 10), committed=key == 1)
    assert tier.drop_behind("a", 0, [(0, 10), (1, 20)]) == 0
    assert tier.drop_behind("a", 20, [(2, 30)]) == 1  # unit 0 goes, committed unit 1 stays
    assert list(tier) == [1, 2, 3]
    assert tier.behind("a") == [(2, 30)]
    assert tier.drop_behind("a", 25, [(2, 30), (3, 40)]) == 0  # unit 2 not read through yet
    assert tier.behind("a") == [(2, 30), (3, 40)]


def test_a_unit_larger_than_the_budget_is_not_held() -> None:
    tier: MemoryTier[int, str] = MemoryTier(10)
    tier.put("a", 1, payload(1, 5), committed=True)
    assert tier.put("a", 1, payload(1, 11)) == 0
    assert 1 not in tier and tier.rejected == 1 and not tier.committed
    tier.check()
