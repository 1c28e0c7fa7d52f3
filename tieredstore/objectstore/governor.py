"""The request governor: how many requests a store may send, and whose go first.

One :class:`Governor` sits in a store's :class:`~tieredstore.objectstore.Chokepoint`
and admits every attempt of every request before it is sent. Its rules:

- **Budgets.** PUT-class and GET-class requests per second for the whole
  store (``put_rate``, ``get_rate``; 0: no budget), and a ceiling in dollars
  per hour at the configured prices (``dollars_per_hour``; 0: none). Each is a
  token bucket holding ``burst`` seconds of its rate. PUT-class for the rate
  is what S3 counts against its 3,500/s per prefix (PUT, COPY, POST, LIST and
  DELETE, aborts included), GET-class what it counts against its 5,500/s (GET,
  HEAD); prices follow S3's bill instead (:data:`PUT_CLASS`, :data:`GET_CLASS`:
  DELETE is free).
- **Priorities.** Each request runs at the :class:`~tieredstore.tasks.Priority`
  of the task that sends it (the host's appends and reads first, then
  read-ahead, compaction, merges, garbage collection and offload): the task
  supervisor tags background work, nothing else has to. A request takes a
  token only while no request of a higher priority waits for one of its
  buckets (a waiter counts only on the buckets holding it back), and
  background requests leave a fifth of each bucket's burst to the host: a
  host request never waits behind queued background ones, only for the
  bucket to refill. A waiting request re-reads its priority each time it
  wakes: a load that a reader joins (``tasks.Urgency``), or a lock holder a
  host task waits for (``tasks.PriorityLock``), goes on at the reader's.
- **SlowDown.** When the store answers ``Throttled`` (503 SlowDown, 429), the
  allowed rate of that request's class under its key prefix (the key's first
  ``prefix_depth`` components: the key prefix and the hash spreading S3's
  partitions) is cut by ``slowdown_cut`` (at most once a second, to the rate
  admitted since the last cut if that is lower, never below 1 request/s),
  then grows back linearly, from 0 to its ceiling in ``slowdown_recovery``
  seconds (AIMD). The ceiling is S3's per-prefix limit, or the store's budget
  if lower; a prefix back at its ceiling is forgotten (swept at most once per
  :data:`CUT_INTERVAL`, whether sent to again or not). Priorities apply to
  these buckets too, so background work slows first.

- **Long waits are told.** A request the governor holds back longer than
  :data:`LONG_WAIT` logs one WARNING naming the key that holds it (the
  budget's, or the SlowDown backoff's with the prefix), the wait and the
  budget; then at most one per :data:`WARN_INTERVAL` a store.
- **A budget must serve its store.** :meth:`GovernorOptions.check_serves`
  refuses a budget that cannot admit a given :class:`Demand` (the store's
  configuration passes what an open and one commit send) within a given time.

The governor only delays requests: it never fails one, and it changes no
answer of a write (``docs/writers.md``). With no budget set and no prefix cut,
:attr:`Governor.limiting` is False and the chokepoint does not call it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from tieredstore.errors import ConfigError, check_field
from tieredstore.tasks import Priority, current_priority

# What each request costs on S3's bill (DELETE is free).
PUT_CLASS = frozenset({"put", "create_multipart", "upload_part", "upload_part_copy",
                       "complete_multipart", "list", "list_multipart_uploads"})
GET_CLASS = frozenset({"get", "head"})

# Which of S3's per-prefix request rates each operation counts against.
RATE_CLASS = {**dict.fromkeys(PUT_CLASS | {"delete", "abort_multipart"}, "put"),
              **dict.fromkeys(GET_CLASS, "get")}

# S3's request rates per partitioned prefix: PUT/COPY/POST/DELETE and GET/HEAD.
S3_PREFIX_LIMITS = {"put": 3500.0, "get": 5500.0}

# The share of a bucket's burst that background requests leave to the host.
HOST_RESERVE = 0.2

# The fewest requests per second a SlowDown cut leaves a prefix.
MIN_PREFIX_RATE = 1.0

# The least time between two cuts of one prefix: the SlowDowns of one burst of
# requests in flight are one signal, not many.
CUT_INTERVAL = 1.0


# A request held back longer than this (seconds) is logged: a WARNING naming what
# holds it, then at most one per WARN_INTERVAL a store.
LONG_WAIT = 1.0
WARN_INTERVAL = 60.0

log = logging.getLogger(__name__)


# S3 Standard's list prices, dollars per 1,000 requests.
S3_PRICE_PUT = 0.005
S3_PRICE_GET = 0.0004


@dataclass(frozen=True, slots=True)
class Prices:
    """Dollars per 1,000 requests of each class (S3 Standard's list prices by default)."""

    put: float = S3_PRICE_PUT
    get: float = S3_PRICE_GET

    def of(self, op: str) -> float:
        """Dollars one request ``op`` costs."""
        if op in PUT_CLASS:
            return self.put / 1000
        if op in GET_CLASS:
            return self.get / 1000
        return 0.0


@dataclass(frozen=True, slots=True)
class Demand:
    """What a piece of work sends (``what``, in words): requests of each class."""

    put: int
    get: int
    what: str


def least_rate(cost: float, floor: float, burst: float, within: float) -> float:
    """The least refill rate at which a full token bucket (of capacity
    ``max(floor, rate * burst)``, as the governor's) admits ``cost`` tokens within
    ``within`` seconds. While ``rate * burst <= floor`` the bucket holds ``floor``
    and the rest takes ``(cost - floor) / rate``; above, ``cost / rate - burst``."""
    if cost <= floor:
        return 0.0
    low = (cost - floor) / within
    if low * burst <= floor:
        return low
    return cost / (burst + within)


def _up(value: float) -> float:
    """``value`` rounded up to two significant digits (a minimum that, given back,
    passes)."""
    step = 10.0 ** (math.floor(math.log10(value)) - 1)
    return math.ceil(value / step - 1e-9) * step


@dataclass(frozen=True, slots=True)
class GovernorOptions:
    """The request governor's budgets and its answer to SlowDown (module doc).

    The defaults never delay a request: no budget, no dollar ceiling; only a
    prefix the store has answered SlowDown is slowed.
    """

    put_rate: float = 0.0
    get_rate: float = 0.0
    dollars_per_hour: float = 0.0
    price_per_1000_put: float = S3_PRICE_PUT
    price_per_1000_get: float = S3_PRICE_GET
    burst: float = 1.0
    slowdown_backoff: bool = True
    slowdown_cut: float = 0.5
    slowdown_recovery: float = 120.0
    prefix_depth: int = 2

    def __post_init__(self) -> None:
        check_field("request_put_rate", self.put_rate, 0, unit=" requests/s (0: no budget)")
        check_field("request_get_rate", self.get_rate, 0, unit=" requests/s (0: no budget)")
        check_field("request_dollars_per_hour", self.dollars_per_hour, 0,
                    unit=" dollars (0: no ceiling)")
        check_field("price_per_1000_put", self.price_per_1000_put, 0, 1000)
        check_field("price_per_1000_get", self.price_per_1000_get, 0, 1000)
        check_field("request_burst", self.burst, 0.001, 3600, unit=" s")
        check_field("slowdown_cut", self.slowdown_cut, 0.01, 0.99)
        check_field("slowdown_recovery", self.slowdown_recovery, 0.001, 86400, unit=" s")
        check_field("prefix_depth", self.prefix_depth, 1, 64)
        if not isinstance(self.prefix_depth, int):
            raise ConfigError("prefix_depth", f"must be an int, got {self.prefix_depth!r}")

    @property
    def prices(self) -> Prices:
        return Prices(self.price_per_1000_put, self.price_per_1000_get)

    def check_serves(self, demand: Demand, within: float) -> None:
        """A :class:`ConfigError` naming the budget that cannot admit ``demand``
        within ``within`` seconds (from full buckets, with nothing else sent), its
        value and the least value that can (0, no budget, always can)."""
        burst = self.burst
        for key, rate, count, name in (("request_put_rate", self.put_rate, demand.put, "PUT"),
                                       ("request_get_rate", self.get_rate, demand.get, "GET")):
            least = least_rate(count, 1.0, burst, within)
            if 0 < rate < least:
                raise ConfigError(key, f"{rate:g} requests/s cannot serve {demand.what} "
                                       f"({count} {name}-class requests) within {within:g} s "
                                       f"at request_burst = {burst:g} s: it must be at least "
                                       f"{_up(least):g} (0: no budget)")
        if self.dollars_per_hour > 0:
            prices = self.prices
            cost = demand.put * prices.of("put") + demand.get * prices.of("get")
            floor = max(prices.put, prices.get) / 1000
            least = least_rate(cost, floor, burst, within) * 3600
            if self.dollars_per_hour < least:
                raise ConfigError("request_dollars_per_hour", f"{self.dollars_per_hour:g} cannot "
                                  f"serve {demand.what} ({demand.put} PUT-class and "
                                  f"{demand.get} GET-class requests, ${cost:.7f} at "
                                  f"price_per_1000_put = {prices.put:g} and price_per_1000_get "
                                  f"= {prices.get:g}) within {within:g} s at request_burst = "
                                  f"{burst:g} s: it must be at least {_up(least):g} "
                                  "(0: no ceiling)")

    @property
    def enabled(self) -> bool:
        """Whether a governor has anything to do: a budget, a ceiling or backoff."""
        return bool(self.put_rate or self.get_rate or self.dollars_per_hour
                    or self.slowdown_backoff)


def key_prefix(key: str, depth: int) -> str:
    """The first ``depth`` ``/``-separated components of ``key``, with their ``/``."""
    end = -1
    for _ in range(depth):
        end = key.find("/", end + 1)
        if end < 0:
            return key
    return key[:end + 1]


class TokenBucket:
    """Tokens refilled at ``rate`` a second up to ``capacity``; and who waits for them.

    ``waiting[p]`` counts the requests of priority ``p`` waiting on this bucket.
    """

    __slots__ = ("capacity", "rate", "stamp", "tokens", "waiting")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.stamp = now
        self.waiting = [0] * len(Priority)

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def delay(self, cost: float, priority: Priority) -> float:
        """Seconds until ``cost`` tokens are there for ``priority`` (0: now; refill
        first). While a higher priority waits here: the time ``cost`` takes to refill."""
        if any(self.waiting[:priority]):
            return cost / self.rate
        need = cost
        if priority is not Priority.HOST:
            need = min(self.capacity, cost + HOST_RESERVE * self.capacity)
        if self.tokens >= need:
            return 0.0
        return (need - self.tokens) / self.rate


class PrefixLimit(TokenBucket):
    """A prefix's bucket after a SlowDown: its rate cut, then growing back."""

    __slots__ = ("burst", "ceiling", "cut_at", "cut_rate", "growth", "taken")

    def __init__(self, ceiling: float, burst: float, recovery: float, now: float) -> None:
        super().__init__(ceiling, max(1.0, ceiling * burst), now)
        self.ceiling = ceiling
        self.burst = burst
        self.growth = ceiling / recovery  # requests/s gained a second
        self.cut_rate = ceiling
        self.cut_at: float | None = None
        self.taken = 0  # requests admitted since the last cut

    def refill(self, now: float) -> None:
        """Refill, then grow the rate (and the burst with it) since the last cut."""
        super().refill(now)
        if self.cut_at is not None:
            self.rate = min(self.ceiling, self.cut_rate + (now - self.cut_at) * self.growth)
            self.capacity = max(1.0, self.rate * self.burst)

    def cut(self, factor: float, now: float) -> bool:
        """Cut the rate to ``factor`` times the lower of the allowed rate and the
        rate admitted since the last cut; at most once per :data:`CUT_INTERVAL`.
        Whether it was cut."""
        if self.cut_at is not None and now - self.cut_at < CUT_INTERVAL:
            return False
        self.refill(now)
        rate = self.rate
        if self.cut_at is not None and self.taken:  # else: only requests sent before
            rate = min(rate, self.taken / (now - self.cut_at))
        self.cut_rate = self.rate = max(MIN_PREFIX_RATE, rate * factor)
        self.capacity = max(1.0, self.rate * self.burst)
        self.tokens = min(self.tokens, self.capacity)
        self.cut_at = now
        self.taken = 0
        return True

    def recovered(self, now: float) -> bool:
        """Back at its ceiling, and not cut within the last :data:`CUT_INTERVAL`."""
        return (self.rate >= self.ceiling and self.cut_at is not None
                and now - self.cut_at >= CUT_INTERVAL)


Waited = Callable[[Priority, float], None]


class Governor:
    """Admits the requests of one store (see the module's rules).

    ``on_wait(priority, seconds)`` hears of each admission that had to wait.
    For one event loop; ``clock`` is monotonic seconds.
    """

    def __init__(self, options: GovernorOptions, *, on_wait: Waited | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self._clock = clock
        self._on_wait = on_wait
        self._prices = options.prices
        now = clock()
        burst = options.burst
        self._classes: dict[str, TokenBucket] = {
            cls: TokenBucket(rate, max(1.0, rate * burst), now)
            for cls, rate in (("put", options.put_rate), ("get", options.get_rate)) if rate > 0}
        self._dollars: TokenBucket | None = None
        if options.dollars_per_hour > 0:
            per_second = options.dollars_per_hour / 3600
            largest = max(self._prices.put, self._prices.get) / 1000
            self._dollars = TokenBucket(per_second, max(largest, per_second * burst), now)
        self._prefixes: dict[tuple[str, str], PrefixLimit] = {}
        self._sweep_at = now  # when recovered prefixes are next looked for
        self._warn_at = -math.inf  # when a long wait may next be logged
        self.limiting = bool(self._classes or self._dollars)
        """Whether any request may have to wait: the chokepoint's fast path."""

    # --- what limits a request --------------------------------------------------------

    def ceiling(self, cls: str) -> float:
        """The most requests per second of ``cls`` a prefix may get."""
        budget = self._classes.get(cls)
        limit = S3_PREFIX_LIMITS[cls]
        return min(limit, budget.rate) if budget is not None else limit

    def allowed_rate(self, key: str, op: str) -> float | None:
        """Requests per second ``op`` may send under ``key``'s prefix after
        SlowDowns, or None while that prefix is not slowed."""
        cls = RATE_CLASS.get(op)
        limit = self._prefixes.get((key_prefix(key, self.options.prefix_depth), cls or ""))
        if limit is None:
            return None
        limit.refill(self._clock())
        return limit.rate

    def _buckets(self, op: str, key: str, now: float
                 ) -> list[tuple[TokenBucket, float]]:
        cls = RATE_CLASS.get(op)
        out: list[tuple[TokenBucket, float]] = []
        if cls is not None:
            bucket = self._classes.get(cls)
            if bucket is not None:
                out.append((bucket, 1.0))
            if self._prefixes and now >= self._sweep_at:
                self._forget_recovered(now)
            if self._prefixes:
                prefix = (key_prefix(key, self.options.prefix_depth), cls)
                limit = self._prefixes.get(prefix)
                if limit is not None:
                    limit.refill(now)
                    if limit.recovered(now):
                        del self._prefixes[prefix]
                        self._update_limiting()
                    else:
                        out.append((limit, 1.0))
        price = self._prices.of(op)
        if self._dollars is not None and price > 0:
            out.append((self._dollars, price))
        return out

    def _forget_recovered(self, now: float) -> None:
        """Forget every prefix back at its ceiling, sent to again or not (a
        deleted queue's never is); at most once per :data:`CUT_INTERVAL`."""
        self._sweep_at = now + CUT_INTERVAL
        for prefix, limit in list(self._prefixes.items()):
            limit.refill(now)
            if limit.recovered(now):
                del self._prefixes[prefix]
        self._update_limiting()

    def _update_limiting(self) -> None:
        self.limiting = bool(self._classes or self._dollars or self._prefixes)

    # --- admission ----------------------------------------------------------------------

    async def admit(self, op: str, key: str) -> None:
        """Return once a request ``op`` on ``key`` may be sent, at the current
        task's priority; its tokens taken."""
        now = self._clock()
        buckets = self._buckets(op, key, now)
        if not buckets:
            return
        started = now
        waited = False
        # Where it is counted waiting, and at which priority: only on the buckets
        # that hold it back now (a host request waiting for a slowed prefix holds
        # back no background request on another prefix).
        counted: list[TokenBucket] = []
        counted_at = Priority.HOST
        try:
            while True:
                priority = current_priority()  # it may rise while waiting (tasks.Urgency)
                for bucket, _ in buckets:
                    bucket.refill(now)
                delays = [(bucket, bucket.delay(cost, priority)) for bucket, cost in buckets]
                delay = max(d for _, d in delays)
                if delay <= 0:
                    break
                for bucket in counted:
                    bucket.waiting[counted_at] -= 1
                counted = [bucket for bucket, d in delays if d > 0]
                counted_at = priority
                for bucket in counted:
                    bucket.waiting[priority] += 1
                waited = True
                if now - started + delay > LONG_WAIT and now >= self._warn_at:
                    self._warn_at = now + WARN_INTERVAL
                    holder = max(delays, key=lambda found: found[1])[0]
                    log.warning("request governor: a %s %s request waits %.1f s for %s; "
                                "long waits are logged at most once every %.0f s",
                                priority.name.lower(), op, now - started + delay,
                                self._holding(holder), WARN_INTERVAL)
                await asyncio.sleep(delay)
                now = self._clock()
        finally:
            for bucket in counted:
                bucket.waiting[counted_at] -= 1
        for bucket, cost in buckets:
            bucket.tokens -= cost
            if isinstance(bucket, PrefixLimit):
                bucket.taken += 1
        if waited and self._on_wait is not None:
            self._on_wait(priority, now - started)

    def _holding(self, bucket: TokenBucket) -> str:
        """The key (and budget) behind ``bucket``, in words."""
        burst = f"request_burst = {self.options.burst:g} s"
        if bucket is self._dollars:
            return (f"request_dollars_per_hour = {self.options.dollars_per_hour:g} (at "
                    f"price_per_1000_put = {self._prices.put:g}, price_per_1000_get = "
                    f"{self._prices.get:g}; {burst})")
        for cls, budget in self._classes.items():
            if bucket is budget:
                return f"request_{cls}_rate = {budget.rate:g} requests/s ({burst})"
        assert isinstance(bucket, PrefixLimit)
        prefix = next((p for (p, _), limit in self._prefixes.items() if limit is bucket), "?")
        return (f"slowdown_backoff: the store answered SlowDown under {prefix!r}, whose rate "
                f"is cut to {bucket.rate:.3g} requests/s, growing back to {bucket.ceiling:g} "
                f"within slowdown_recovery = {self.options.slowdown_recovery:g} s")

    def slowed(self, op: str, key: str) -> None:
        """The store answered ``op`` on ``key`` with SlowDown: cut its prefix's rate."""
        cls = RATE_CLASS.get(op)
        if cls is None or not self.options.slowdown_backoff:
            return
        now = self._clock()
        prefix = (key_prefix(key, self.options.prefix_depth), cls)
        limit = self._prefixes.get(prefix)
        if limit is None:
            limit = self._prefixes[prefix] = PrefixLimit(
                self.ceiling(cls), self.options.burst, self.options.slowdown_recovery, now)
        limit.cut(self.options.slowdown_cut, now)
        self.limiting = True
