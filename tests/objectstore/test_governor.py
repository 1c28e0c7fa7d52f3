"""The request governor through its public options: budgets as token buckets,
the dollar ceiling, priorities from the task supervisor, and AIMD per key
prefix on SlowDown. Attempts are fakes; the clock is real where rates are
measured (rates high enough to keep the tests short), fake for AIMD's arithmetic.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tieredstore.errors import ConfigError, Throttled
from tieredstore.metrics import register_metrics
from tieredstore.objectstore import (
    Chokepoint,
    Governor,
    GovernorOptions,
    RetryPolicy,
    S3ObjectStore,
    S3Settings,
)
from tieredstore.objectstore.governor import (
    CUT_INTERVAL,
    S3_PREFIX_LIMITS,
    Demand,
    key_prefix,
    least_rate,
)
from tieredstore.tasks import Background, Priority, Urgency

FAST = RetryPolicy(max_attempts=6, base_delay=0.0, max_delay=0.0, timeout=5.0)
KEY = "tieredstore/ab/cluster/broker/topic/0/commitlog/seg-0/chunk-0"


async def ok() -> bytes:
    return b""


async def send(choke: Chokepoint, op: str, n: int, key: str = KEY) -> list[float]:
    """``n`` requests at once; when each was sent, seconds from the start."""
    start = time.monotonic()
    sent: list[float] = []

    async def attempt() -> bytes:
        sent.append(time.monotonic() - start)
        return b""

    await asyncio.gather(*(choke.call(op, attempt, key=key) for _ in range(n)))
    return sent


def fastest_window(sent: list[float], seconds: float) -> int:
    """The most requests sent within any ``seconds``."""
    sent = sorted(sent)
    return max(sum(1 for t in sent[i:] if t - s <= seconds) for i, s in enumerate(sent))


# --- options -------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value", "key"), [
    ("put_rate", -1.0, "request_put_rate"),
    ("get_rate", float("nan"), "request_get_rate"),
    ("dollars_per_hour", -0.5, "request_dollars_per_hour"),
    ("burst", 0.0, "request_burst"),
    ("slowdown_cut", 1.0, "slowdown_cut"),
    ("slowdown_recovery", 0.0, "slowdown_recovery"),
    ("prefix_depth", 0, "prefix_depth"),
    ("prefix_depth", 2.5, "prefix_depth"),
    ("put_rate", True, "request_put_rate"),
])
def test_bad_options_name_their_key(field: str, value: object, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        GovernorOptions(**{field: value})  # type: ignore[arg-type]
    assert raised.value.key == key


def test_the_defaults_never_delay_a_request() -> None:
    governor = Governor(GovernorOptions())
    assert not governor.limiting
    assert GovernorOptions().enabled  # the SlowDown backoff is on
    assert not GovernorOptions(slowdown_backoff=False).enabled
    assert Chokepoint(FAST, governor=GovernorOptions(slowdown_backoff=False)).governor is None


def test_the_key_prefix_is_the_first_components() -> None:
    assert key_prefix(KEY, 2) == "tieredstore/ab/"
    assert key_prefix(KEY, 1) == "tieredstore/"
    assert key_prefix("a/b", 5) == "a/b"


# --- budgets -------------------------------------------------------------------------


async def test_a_put_budget_caps_put_class_requests_per_second() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(put_rate=200, burst=0.05))
    sent = await send(choke, "put", 60)
    # 10 at once (the burst), then 200/s: the last after (60 - 10) / 200 s.
    assert max(sent) >= 0.24, sorted(sent)
    assert fastest_window(sent, 0.1) <= 10 + 200 * 0.1 + 1, sorted(sent)
    # Requests past the burst waited (how many depends on how fast this loop sent
    # them: a stall refills the bucket, so only "some" is certain).
    assert choke.metrics.waits["host"] >= 1
    assert choke.metrics.wait_seconds["host"] > 0


async def test_a_put_budget_does_not_slow_gets() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(put_rate=10, burst=0.1))
    sent = await send(choke, "get", 200)
    assert choke.metrics.waits == {}
    assert max(sent) < 2.0  # 20 s at the PUT budget


async def test_deletes_count_against_the_put_rate() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(put_rate=100, burst=0.05))
    sent = await send(choke, "delete", 25)
    assert max(sent) >= (25 - 5) / 100 * 0.9


async def test_a_dollar_ceiling_caps_requests_at_their_prices() -> None:
    # $3.60 an hour is $0.001 a second: 200 PUTs at $0.005 per 1,000, or 2,500 GETs.
    options = GovernorOptions(dollars_per_hour=3.6, burst=0.05)
    choke = Chokepoint(FAST, governor=options)
    puts = await send(choke, "put", 60)
    assert max(puts) >= 0.24, sorted(puts)
    assert fastest_window(puts, 0.1) <= 10 + 20 + 1
    waited = dict(choke.metrics.waits)
    deletes = await send(choke, "delete", 400)  # free
    assert choke.metrics.waits == waited
    assert max(deletes) < 1.0  # 2 s at the PUT price


# --- a budget that must serve its store ----------------------------------------------


TWENTY_PUTS = Demand(put=20, get=0, what="twenty PUTs")


def test_a_budget_below_the_least_for_a_demand_is_refused_naming_key_value_and_least() -> None:
    # 20 from a bucket of 1 within 60 s: (20 - 1) / 60 = 0.32 (which holds below 1 token)
    least = least_rate(20, 1.0, 1.0, 60.0)
    assert least == pytest.approx(19 / 60)
    GovernorOptions(put_rate=least).check_serves(TWENTY_PUTS, within=60.0)
    GovernorOptions().check_serves(TWENTY_PUTS, within=60.0)  # 0: no budget
    with pytest.raises(ConfigError) as raised:
        GovernorOptions(put_rate=0.01).check_serves(TWENTY_PUTS, within=60.0)
    assert raised.value.key == "request_put_rate"
    text = str(raised.value)
    assert "0.01 requests/s" in text and "at least 0.32" in text and "twenty PUTs" in text, text
    with pytest.raises(ConfigError) as raised:
        GovernorOptions(dollars_per_hour=0.001).check_serves(TWENTY_PUTS, within=60.0)
    assert raised.value.key == "request_dollars_per_hour"
    assert "0.001 cannot" in str(raised.value) and "at least" in str(raised.value)


async def test_a_budget_at_the_least_admits_its_demand_within_the_window() -> None:
    """The arithmetic against the bucket itself: at the least rate twenty PUTs are
    sent within the window; at half of it they take twice as long."""
    within, burst = 1.0, 0.1
    least = least_rate(20, 1.0, burst, within)  # 20 / 1.1 (its burst holds 1.8 tokens)
    assert least == pytest.approx(20 / 1.1)
    at_least = Chokepoint(FAST, governor=GovernorOptions(put_rate=least, burst=burst))
    sent = await send(at_least, "put", 20)
    assert within * 0.9 <= max(sent) <= within + 0.5, sorted(sent)
    half = GovernorOptions(put_rate=least / 2, burst=burst)
    with pytest.raises(ConfigError):
        half.check_serves(TWENTY_PUTS, within=within)
    assert max(await send(Chokepoint(FAST, governor=half), "put", 20)) > within * 1.5


# --- long waits are told -------------------------------------------------------------


@pytest.mark.parametrize(("options", "told"), [
    (GovernorOptions(put_rate=0.01), "request_put_rate = 0.01 requests/s"),
    (GovernorOptions(dollars_per_hour=0.001), "request_dollars_per_hour = 0.001"),
])
async def test_a_long_wait_logs_one_warning_naming_the_budget_within_a_second(
        options: GovernorOptions, told: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tieredstore.objectstore.governor")
    choke = Chokepoint(FAST, governor=options)
    await choke.call("put", ok, key=KEY)  # the burst's one token
    waiting = [asyncio.create_task(choke.call("put", ok, key=KEY)) for _ in range(3)]
    try:
        started = time.time()
        await asyncio.sleep(0.5)  # the other two wait as long, and log nothing
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
        assert warnings[0].created - started < 1.0
        text = warnings[0].getMessage()
        assert told in text and "host put request waits" in text, text
        assert not any(t.done() for t in waiting)
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


async def test_short_waits_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tieredstore.objectstore.governor")
    choke = Chokepoint(FAST, governor=GovernorOptions(put_rate=100, burst=0.01))
    await send(choke, "put", 20)  # each waits 10 ms, 0.2 s in all
    assert choke.metrics.waits["host"] >= 1
    assert caplog.records == []


# --- priorities ----------------------------------------------------------------------


class Race:
    """Background PUTs queued on a chokepoint, then the host's: who finished when."""

    def __init__(self, choke: Chokepoint) -> None:
        self.choke = choke
        self.done: list[str] = []
        self.background = Background()

    async def one(self, who: str) -> None:
        await self.choke.call("put", ok, key=KEY)
        self.done.append(who)

    def queue(self, priority: Priority, n: int) -> asyncio.Task[None]:
        """``n`` PUTs at ``priority``, sent at once from one background task."""
        who = priority.name.lower()

        async def work() -> None:
            await asyncio.gather(*(self.one(who) for _ in range(n)))

        return self.background.spawn(work(), who, priority=priority)

    async def host(self, n: int) -> float:
        """``n`` host PUTs at once; the seconds they took."""
        started = time.monotonic()
        await asyncio.gather(*(self.one("host") for _ in range(n)))
        return time.monotonic() - started


async def test_the_host_never_waits_behind_queued_background_requests() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(put_rate=50, burst=0.1))
    race = Race(choke)
    task = race.queue(Priority.MERGE, 100)
    await asyncio.sleep(0.2)  # the bucket is drained, merges are queued
    assert 100 - len(race.done) > 50
    host_seconds = await race.host(5)
    # Five tokens at 50/s take 0.1 s; the queued merges would take > 1 s.
    assert host_seconds < 0.9, host_seconds  # margin for a loaded machine
    done = race.done
    hosts_done_at = max(i for i, who in enumerate(done) if who == "host")
    assert done[hosts_done_at - 5:hosts_done_at + 1].count("merge") <= 2, done
    await task
    assert done.count("merge") == 100  # background slowed, not dropped
    assert choke.metrics.waits["merge"] > 50
    await race.background.close()


async def test_background_leaves_a_reserve_of_the_burst_to_the_host() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(put_rate=10, burst=1.0))

    async def gc() -> list[float]:
        return await send(choke, "put", 10)

    background = Background()
    sent = await background.start(gc(), "gc", priority=Priority.GC)
    # A burst of 10: the host could send 10 at once, GC gets 8 then waits.
    assert choke.metrics.waits["gc"] == 2 and sorted(sent)[8] > 0.05, sorted(sent)
    await send(choke, "put", 1)
    assert "host" not in choke.metrics.waits  # the reserve was there
    await background.close()


async def test_a_queued_read_ahead_a_reader_joins_goes_at_the_host_priority() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(get_rate=40, burst=0.05))
    background = Background()
    sent: list[str] = []

    async def get(who: str) -> None:
        await choke.call("get", ok, key=KEY)
        sent.append(who)

    async def crowd() -> None:
        await asyncio.gather(*(get("crowd") for _ in range(80)))

    crowded = background.spawn(crowd(), "read-ahead", priority=Priority.READ_AHEAD)
    await asyncio.sleep(0.05)
    urgency = Urgency(Priority.READ_AHEAD)
    load = background.start(get("joined"), "load", priority=urgency)
    await asyncio.sleep(0.05)
    assert "joined" not in sent
    urgency.rise(Priority.HOST)  # a reader now waits for this load
    started = time.monotonic()
    await load
    assert time.monotonic() - started < 1.5  # a few refills at 40/s, not 80 requests (2 s)
    assert sent.count("crowd") < 40, sent
    urgency.rise(Priority.GC)  # never lowers
    assert urgency.priority is Priority.HOST
    await crowded
    await background.close()


# --- SlowDown: AIMD per prefix ------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_slowdown_cuts_its_prefix_and_class_then_the_rate_grows_back() -> None:
    clock = Clock()
    governor = Governor(GovernorOptions(slowdown_cut=0.5, slowdown_recovery=10.0), clock=clock)
    other = "tieredstore/cd/cluster/broker/topic/1/commitlog/seg-0/chunk-0"
    assert governor.allowed_rate(KEY, "put") is None
    governor.slowed("put", KEY)
    assert governor.limiting
    assert governor.allowed_rate(KEY, "put") == S3_PREFIX_LIMITS["put"] / 2
    assert governor.allowed_rate(KEY, "upload_part") == S3_PREFIX_LIMITS["put"] / 2
    assert governor.allowed_rate(KEY, "get") is None  # GET-class: its own limit
    assert governor.allowed_rate(other, "put") is None  # another prefix
    governor.slowed("put", KEY)  # the same burst's SlowDowns: one cut
    assert governor.allowed_rate(KEY, "put") == S3_PREFIX_LIMITS["put"] / 2
    # Additive increase: 3,500/s over 10 s is 350/s more each second.
    clock.now += 2
    assert governor.allowed_rate(KEY, "put") == pytest.approx(1750 + 700)
    # Requests admitted since the cut: 40 in 2 s. The next SlowDown cuts from
    # that rate (20/s), not from the allowed 2,450/s.
    for _ in range(40):
        await governor.admit("put", KEY)
    governor.slowed("put", KEY)
    assert governor.allowed_rate(KEY, "put") == pytest.approx(10.0)
    # Never below 1/s: one request in 5 s, then a SlowDown.
    clock.now += 5
    await governor.admit("put", KEY)
    governor.slowed("put", KEY)
    assert governor.allowed_rate(KEY, "put") == pytest.approx(1.0)
    # Back at the ceiling, the prefix is forgotten: nothing limits any more.
    clock.now += 10.1
    await governor.admit("put", KEY)
    assert governor.allowed_rate(KEY, "put") is None
    assert not governor.limiting


async def slowed_down(choke: Chokepoint, op: str, times: int) -> None:
    """One ``op`` on :data:`KEY` that the store answers SlowDown ``times``, then OK."""
    answers = [Throttled("SlowDown", op=op, key=KEY)] * times

    async def attempt() -> bytes:
        if answers:
            raise answers.pop()
        return b""

    await choke.call(op, attempt, key=KEY)


async def test_the_chokepoint_counts_slowdowns_by_prefix_and_cuts_the_rate() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(slowdown_recovery=3600.0))
    await slowed_down(choke, "put", 3)
    assert choke.metrics.slowdowns == {"put:tieredstore/ab/": 3}
    assert choke.governor is not None
    rate = choke.governor.allowed_rate(KEY, "put")
    assert rate == pytest.approx(S3_PREFIX_LIMITS["put"] / 2, rel=1e-3)  # one cut


async def test_slowdowns_are_counted_without_a_governor_too() -> None:
    choke = Chokepoint(FAST)
    assert choke.governor is None
    await slowed_down(choke, "get", 1)
    assert choke.metrics.slowdowns == {"get:tieredstore/ab/": 1}


async def test_a_cut_prefix_slows_background_before_the_host() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(slowdown_recovery=3600.0))
    governor = choke.governor
    assert governor is not None
    governor.slowed("put", KEY)  # first cut: half of S3's limit
    await send(choke, "put", 20)
    await asyncio.sleep(CUT_INTERVAL)
    governor.slowed("put", KEY)  # 20 sent in about a second: cut to about 10/s
    rate = governor.allowed_rate(KEY, "put")
    assert rate is not None and 5 <= rate <= 11
    race = Race(choke)
    task = race.queue(Priority.COMPACTION, 12)
    await asyncio.sleep(0.3)
    assert await race.host(2) < 1.0  # two tokens at ~10/s, not the queue (1.2 s)
    await task
    done = race.done
    assert done.count("compaction") == 12
    assert "compaction" in done[done.index("host"):]  # queued compactions came after
    # Other prefixes are not slowed.
    waited = dict(choke.metrics.waits)
    await send(choke, "put", 50, key="tieredstore/zz/x")
    assert choke.metrics.waits == waited
    await race.background.close()


# --- metrics -------------------------------------------------------------------------


async def test_the_collector_exports_waits_seconds_and_slowdowns() -> None:
    choke = Chokepoint(FAST, governor=GovernorOptions(put_rate=100, burst=0.01))
    await send(choke, "put", 5)
    choke.metrics.record_slowdown("get", "tieredstore/ab/")
    registry = CollectorRegistry()
    register_metrics(registry, store=choke.metrics)
    assert registry.get_sample_value("tieredstore_store_throttled_requests_total",
                                     {"priority": "host"}) == 4
    seconds = registry.get_sample_value("tieredstore_store_throttled_seconds_total",
                                        {"priority": "host"})
    assert seconds is not None and seconds > 0
    assert registry.get_sample_value("tieredstore_store_slowdowns_total",
                                     {"op": "get", "prefix": "tieredstore/ab/"}) == 1


async def test_recovered_prefixes_are_forgotten_though_never_sent_to_again() -> None:
    # A queue deleted after a SlowDown (or a burst over many hashed prefixes):
    # its prefix is never sent to again, yet it must not keep the governor
    # limiting (the chokepoint's fast path) or stay in memory for good.
    clock = Clock()
    governor = Governor(GovernorOptions(slowdown_recovery=10.0), clock=clock)
    gone = [f"tieredstore/{i:04x}/cluster/broker/gone/0/x" for i in range(100)]
    for key in gone:
        governor.slowed("put", key)
    assert governor.limiting
    clock.now += 10 + CUT_INTERVAL
    await governor.admit("put", "tieredstore/ffff/cluster/broker/live/0/x")
    assert all(governor.allowed_rate(key, "put") is None for key in gone)
    assert not governor.limiting


async def test_a_host_waiting_on_a_slowed_prefix_holds_back_no_other_prefix() -> None:
    # The host waits for prefix A's bucket (cut to 1/s); the store's budget has
    # plenty. Background work on another prefix must not wait until the host's
    # requests on A are through: they hold back nobody on a bucket they do not
    # wait for.
    choke = Chokepoint(FAST, governor=GovernorOptions(put_rate=1000, slowdown_recovery=3600.0))
    governor = choke.governor
    assert governor is not None
    governor.slowed("put", KEY)
    await send(choke, "put", 1)
    await asyncio.sleep(CUT_INTERVAL)
    governor.slowed("put", KEY)  # one request in a second: cut to 1/s
    rate = governor.allowed_rate(KEY, "put")
    assert rate is not None and rate < 1.5
    hosts = asyncio.ensure_future(send(choke, "put", 5))  # about 4 s on prefix A
    await asyncio.sleep(0.05)
    assert not hosts.done()

    async def merge() -> list[float]:
        return await send(choke, "put", 10, key="tieredstore/zz/x")

    started = time.monotonic()
    await Background().start(merge(), "merge", priority=Priority.MERGE)
    assert time.monotonic() - started < 1.5  # not the ~4 s the host's wait on A takes
    assert not hosts.done()
    await hosts


async def test_a_batch_delete_answered_slowdown_per_key_is_a_slowdown() -> None:
    # DeleteObjects answers 200 with per-key errors: SlowDown among them is S3
    # throttling the prefix, to be counted and backed off like a 503.
    class Client:
        async def delete_objects(self, **request: Any) -> dict[str, Any]:
            keys = [o["Key"] for o in request["Delete"]["Objects"]]
            return {"Errors": [{"Key": k, "Code": "SlowDown", "Message": "Reduce your "
                                "request rate."} for k in keys]}

    choke = Chokepoint(RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=0.0),
                       governor=GovernorOptions(slowdown_recovery=3600.0))
    store = S3ObjectStore(S3Settings(bucket="b", region="us-east-1",
                                     endpoint_url="http://127.0.0.1:9"), chokepoint=choke)
    client = Client()

    async def fake_client() -> Client:
        return client

    store._get_client = fake_client  # type: ignore[method-assign]
    with pytest.raises(Throttled):
        await store.delete_many([KEY])
    assert choke.metrics.slowdowns == {"delete:tieredstore/ab/": 2}
    assert choke.governor is not None and choke.governor.allowed_rate(KEY, "delete")
