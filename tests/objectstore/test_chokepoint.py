"""The chokepoint alone, with fake attempts: retries, timeouts, backoff, metrics.

Also the S3 backend's error translation, from hand-made botocore errors: the
chokepoint's retry decisions are only as good as the types it is handed.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Callable, Iterator
from fractions import Fraction

import botocore.exceptions
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tieredstore.errors import (
    AccessDenied,
    ConfigError,
    InvalidRequest,
    NoSuchUpload,
    ObjectNotFound,
    ObjectStoreError,
    PreconditionFailed,
    RequestTimeout,
    ServerError,
    Throttled,
    TransientError,
)
from tieredstore.objectstore import ByteRange, Chokepoint, ObjectStore, RetryPolicy
from tieredstore.objectstore.backends.s3_errors import translate_client_error, translate_error
from tieredstore.objectstore.chokepoint import LATENCY_BUCKETS, RequestMetrics

# Retries without waiting to speak of: the tests stay fast.
FAST = RetryPolicy(max_attempts=4, base_delay=0.0005, max_delay=0.002, timeout=1.0)


_real_sleep = asyncio.sleep  # the ``sleeps`` fixture replaces asyncio.sleep


class Script:
    """An attempt function that plays outcomes in order: raise or return each."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def __call__(self) -> object:
        outcome = self.outcomes[min(self.calls, len(self.outcomes) - 1)]
        self.calls += 1
        await _real_sleep(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Record the chokepoint's backoff sleeps (and sleep not at all)."""
    recorded: list[float] = []

    async def fake_sleep(delay: float, result: object = None) -> object:
        # Only the chokepoint's backoff: other tasks on the session's event loop
        # (a store's dispatch ticker, a pool's timer) sleep through here too.
        if sys._getframe(1).f_globals.get("__name__") != "tieredstore.objectstore.chokepoint":
            return await _real_sleep(delay, result)
        recorded.append(delay)
        return await _real_sleep(0, result)

    monkeypatch.setattr("tieredstore.objectstore.chokepoint.asyncio.sleep", fake_sleep)
    yield recorded


# --- retries ------------------------------------------------------------------

TRANSIENT: list[Callable[[], Exception]] = [
    lambda: Throttled("slow down", op="get"),
    lambda: ServerError("500", op="get"),
    lambda: RequestTimeout("read timeout", op="get"),
    lambda: TransientError("connection reset", op="get"),
]


@pytest.mark.parametrize("make", TRANSIENT, ids=lambda m: type(m()).__name__)
async def test_transient_errors_are_retried_until_success(
    make: Callable[[], Exception],
) -> None:
    choke = Chokepoint(FAST, seed=1)
    attempt = Script(make(), make(), b"data")
    assert await choke.call("get", attempt) == b"data"
    assert attempt.calls == 3
    assert choke.metrics.retries["get"] == 2


@pytest.mark.parametrize("make", TRANSIENT, ids=lambda m: type(m()).__name__)
async def test_transient_errors_give_up_after_max_attempts_with_the_last_error(
    make: Callable[[], Exception],
) -> None:
    choke = Chokepoint(FAST, seed=1)
    errors = [make() for _ in range(FAST.max_attempts)]
    attempt = Script(*errors, b"too late")
    with pytest.raises(type(errors[0])) as raised:
        await choke.call("get", attempt)
    assert raised.value is errors[-1]
    assert attempt.calls == FAST.max_attempts
    assert choke.metrics.retries["get"] == FAST.max_attempts - 1


async def test_max_attempts_one_means_no_retry() -> None:
    choke = Chokepoint(RetryPolicy(max_attempts=1, base_delay=0, timeout=1.0))
    attempt = Script(Throttled("slow down"), b"never")
    with pytest.raises(Throttled):
        await choke.call("put", attempt)
    assert attempt.calls == 1
    assert choke.metrics.retries == {}


@pytest.mark.parametrize(
    "error",
    [
        PreconditionFailed("taken", op="put", key="k"),
        ObjectNotFound("missing", op="get", key="k"),
        NoSuchUpload("gone", op="upload_part", key="k"),
        InvalidRequest("bad range", op="get", key="k"),
        AccessDenied("no", op="get", key="k"),
        ObjectStoreError("unknown", op="get", key="k"),
        RuntimeError("a bug"),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_permanent_errors_are_raised_at_once(error: Exception, sleeps: list[float]) -> None:
    choke = Chokepoint(FAST)
    attempt = Script(error, b"never")
    with pytest.raises(type(error)) as raised:
        await choke.call("op", attempt)
    assert raised.value is error
    assert attempt.calls == 1
    assert sleeps == []
    assert choke.metrics.retries == {}
    assert choke.metrics.errors == {f"op:{type(error).__name__}": 1}


async def test_cancellation_is_not_retried() -> None:
    choke = Chokepoint(FAST)
    attempt = Script(asyncio.CancelledError(), b"never")
    with pytest.raises(asyncio.CancelledError):
        await choke.call("get", attempt)
    assert attempt.calls == 1


# --- timeouts -----------------------------------------------------------------


async def test_slow_attempt_hits_the_per_attempt_timeout() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=0.0005, max_delay=0.001, timeout=0.02)
    choke = Chokepoint(policy)
    calls = 0

    async def hangs() -> bytes:
        nonlocal calls
        calls += 1
        await asyncio.sleep(10)
        return b"never"

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RequestTimeout) as raised:
        await choke.call("get", hangs)
    elapsed = loop.time() - started
    assert isinstance(raised.value, TimeoutError) and isinstance(raised.value, TransientError)
    assert raised.value.op == "get"
    assert calls == 3
    assert elapsed < 2.0, f"three 20 ms attempts took {elapsed:.2f}s"
    assert choke.metrics.errors == {"get:timeout": 3}
    assert choke.metrics.retries["get"] == 2


async def test_timeout_bounds_each_attempt_not_the_call() -> None:
    # Two slow attempts time out, the third is quick: the call succeeds
    # although it took longer than one timeout in all.
    policy = RetryPolicy(max_attempts=3, base_delay=0.0005, max_delay=0.001, timeout=0.05)
    choke = Chokepoint(policy)
    calls = 0

    async def slow_then_fast() -> bytes:
        nonlocal calls
        calls += 1
        await asyncio.sleep(10 if calls < 3 else 0.03)
        return b"ok"

    assert await choke.call("get", slow_then_fast) == b"ok"
    assert calls == 3


async def test_request_timeout_raised_by_the_attempt_is_kept() -> None:
    choke = Chokepoint(RetryPolicy(max_attempts=2, base_delay=0, timeout=1.0))
    error = RequestTimeout("botocore read timeout", op="get", key="k")
    with pytest.raises(RequestTimeout) as raised:
        await choke.call("get", Script(error))
    assert raised.value is error


# --- backoff ------------------------------------------------------------------


async def test_backoff_delays_grow_and_stay_under_the_cap(sleeps: list[float]) -> None:
    policy = RetryPolicy(max_attempts=10, base_delay=0.001, max_delay=0.004, timeout=1.0)
    choke = Chokepoint(policy, seed=7)
    with pytest.raises(ServerError):
        await choke.call("get", Script(ServerError("500")))
    assert len(sleeps) == policy.max_attempts - 1  # no sleep after the last attempt
    for retry, delay in enumerate(sleeps, start=1):
        cap = min(policy.max_delay, policy.base_delay * 2 ** (retry - 1))
        assert 0 <= delay <= cap, f"retry {retry}: slept {delay}, cap {cap}"


@given(
    attempt=st.integers(min_value=1, max_value=100_000),
    base=st.floats(min_value=0, max_value=1),
    extra=st.floats(min_value=0, max_value=30),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_backoff_delay_never_exceeds_its_cap(
    attempt: int, base: float, extra: float, seed: int
) -> None:
    policy = RetryPolicy(max_attempts=attempt, base_delay=base, max_delay=base + extra)
    delay = policy.delay(attempt, random.Random(seed))
    assert 0 <= delay <= policy.max_delay
    # Exact arithmetic: base * 2**(attempt-1) overflows a float past attempt 1024.
    assert delay <= Fraction(policy.base_delay) * 2 ** (attempt - 1)


def test_backoff_is_jittered_and_reproducible_with_a_seed() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=1.0)
    draws = [policy.delay(1, random.Random(i)) for i in range(50)]
    assert len(set(draws)) > 40  # full jitter, not a fixed delay
    assert policy.delay(3, random.Random(5)) == policy.delay(3, random.Random(5))


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"max_attempts": 0}, "retry_max_attempts"),
        ({"base_delay": -0.1}, "retry_base_delay"),
        ({"base_delay": 3.0, "max_delay": 2.0}, "retry_base_delay"),
        ({"timeout": 0}, "request_timeout"),
    ],
)
def test_retry_policy_refuses_bad_values(kwargs: dict[str, float], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert raised.value.key == key


# --- metrics ------------------------------------------------------------------


async def test_metrics_count_requests_retries_errors_and_bytes() -> None:
    choke = Chokepoint(FAST, seed=3)
    await choke.call("put", Script(Throttled("slow"), ServerError("500"), None), bytes_up=100)
    await choke.call("get", Script(b"x" * 40))
    with pytest.raises(ObjectNotFound):
        await choke.call("get", Script(ObjectNotFound("missing")))

    m = choke.metrics
    # Every attempt is a request, and sends its bytes again.
    assert dict(m.requests) == {"put": 3, "get": 2}
    assert dict(m.retries) == {"put": 2}
    assert dict(m.errors) == {"put:Throttled": 1, "put:ServerError": 1, "get:ObjectNotFound": 1}
    assert m.bytes_up["put"] == 300
    assert m.bytes_down["get"] == 40
    assert m.total_requests() == 5
    assert m.total_requests("get") == 2
    assert sum(m.latency_buckets["put"]) == 3

    snap = m.snapshot()
    assert snap["requests"] == {"put": 3, "get": 2}
    assert snap["bytes_down"]["get"] == 40
    m.reset()
    assert m.total_requests() == 0 and m.snapshot()["errors"] == {}


async def test_store_metrics_count_bytes_of_gets_and_puts(fast_store: ObjectStore) -> None:
    await fast_store.put("k", b"0123456789")
    await fast_store.get("k", ByteRange(2, 5))
    await fast_store.get_object("k")
    assert fast_store.metrics.bytes_up["put"] == 10
    assert fast_store.metrics.bytes_down["get"] == 15


def test_latency_lands_in_the_right_bucket() -> None:
    m = RequestMetrics()
    m.record("get", 0.0005)
    m.record("get", 0.007)
    m.record("get", 99.0)
    buckets = m.latency_buckets["get"]
    assert buckets[0] == 1  # <= 1 ms
    assert buckets[LATENCY_BUCKETS.index(0.01)] == 1  # (5 ms, 10 ms]
    assert buckets[-1] == 1  # beyond the last bound
    assert m.latency_sum["get"] == pytest.approx(99.0075)


async def test_metrics_are_shared_when_given() -> None:
    shared = RequestMetrics()
    await Chokepoint(FAST, shared).call("a", Script(1))
    await Chokepoint(FAST, shared).call("b", Script(2))
    assert shared.total_requests() == 2


# --- S3 error translation -----------------------------------------------------


def _client_error(
    code: str, status: int, op_name: str = "GetObject"
) -> botocore.exceptions.ClientError:
    response: dict[str, object] = {
        "Error": {"Code": code, "Message": f"message for {code}"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return botocore.exceptions.ClientError(response, op_name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("NoSuchKey", 404, ObjectNotFound),
        ("404", 404, ObjectNotFound),  # HEAD answers have no body: the code is the status
        ("NoSuchBucket", 404, ObjectNotFound),
        ("NoSuchUpload", 404, NoSuchUpload),
        ("PreconditionFailed", 412, PreconditionFailed),
        ("412", 412, PreconditionFailed),
        ("SlowDown", 503, Throttled),
        ("503", 503, Throttled),
        ("ServiceUnavailable", 503, Throttled),
        ("TooManyRequests", 429, Throttled),
        ("Throttling", 400, Throttled),
        ("RequestTimeout", 400, RequestTimeout),
        ("InternalError", 500, ServerError),
        ("500", 500, ServerError),
        ("BadGateway", 502, ServerError),
        ("GatewayTimeout", 504, ServerError),
        ("ConditionalRequestConflict", 409, ServerError),  # AWS: retry it
        ("OperationAborted", 409, ServerError),
        ("AccessDenied", 403, AccessDenied),
        ("403", 403, AccessDenied),
        ("InvalidAccessKeyId", 403, AccessDenied),
        ("SignatureDoesNotMatch", 403, AccessDenied),
        ("ExpiredToken", 400, AccessDenied),
        ("InvalidRange", 416, InvalidRequest),
        ("EntityTooSmall", 400, InvalidRequest),
        ("InvalidPart", 400, InvalidRequest),
        ("InvalidPartOrder", 400, InvalidRequest),
        ("MalformedXML", 400, InvalidRequest),
        ("KeyTooLongError", 400, InvalidRequest),
        # A feature the server lacks stays lacking: not worth a retry.
        ("NotImplemented", 501, InvalidRequest),
        ("501", 501, InvalidRequest),
        ("SomethingNew", 0, ObjectStoreError),
    ],
)
def test_translate_client_error(code: str, status: int, expected: type[Exception]) -> None:
    error = translate_client_error(_client_error(code, status), "get", "a/b")
    assert type(error) is expected, f"{code}/{status} -> {type(error).__name__}"
    assert isinstance(error, ObjectStoreError)
    assert (error.op, error.key) == ("get", "a/b")
    assert code in str(error) and "a/b" in str(error)
    retried = isinstance(error, TransientError)
    assert retried == (expected in (Throttled, ServerError, RequestTimeout))


def test_translated_errors_keep_their_builtin_bases() -> None:
    assert isinstance(translate_client_error(_client_error("NoSuchKey", 404), "get", "k"),
                      FileNotFoundError)
    assert isinstance(translate_client_error(_client_error("AccessDenied", 403), "get", "k"),
                      PermissionError)
    assert isinstance(translate_client_error(_client_error("InvalidRange", 416), "get", "k"),
                      ValueError)


def test_translate_client_error_without_metadata() -> None:
    bare = botocore.exceptions.ClientError({}, "GetObject")
    assert type(translate_client_error(bare, "get", "k")) is ObjectStoreError


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (botocore.exceptions.ReadTimeoutError(endpoint_url="http://s3"), RequestTimeout),
        (botocore.exceptions.ConnectTimeoutError(endpoint_url="http://s3"), RequestTimeout),
        (botocore.exceptions.EndpointConnectionError(endpoint_url="http://s3"), TransientError),
        (botocore.exceptions.ConnectionClosedError(endpoint_url="http://s3"), TransientError),
        (ConnectionResetError("reset by peer"), TransientError),
        (ValueError("a bug"), ObjectStoreError),
    ],
    ids=lambda v: type(v).__name__,
)
def test_translate_error(exc: Exception, expected: type[Exception]) -> None:
    error = translate_error(exc, "put", "k")
    assert type(error) is expected
    assert (error.op, error.key) == ("put", "k")  # type: ignore[attr-defined]


def test_no_credentials_is_access_denied_saying_what_would_give_some() -> None:
    error = translate_error(botocore.exceptions.NoCredentialsError(), "list", "k/")
    assert isinstance(error, AccessDenied) and isinstance(error, PermissionError)
    text = str(error)
    assert "no S3 credentials in this process" in text and "s3_access_key_id" in text, text
    assert "AWS_ACCESS_KEY_ID" in text and "Spark's executors" in text, text


def test_translate_error_of_a_client_error_uses_its_code() -> None:
    assert type(translate_error(_client_error("SlowDown", 503), "put", "k")) is Throttled


async def test_translated_errors_drive_the_chokepoint(sleeps: list[float]) -> None:
    choke = Chokepoint(FAST)

    def s3(code: str, status: int) -> Exception:
        return translate_client_error(_client_error(code, status), "put", "k")

    attempt = Script(s3("SlowDown", 503), s3("InternalError", 500), b"ok")
    assert await choke.call("put", attempt) == b"ok"
    attempt = Script(s3("PreconditionFailed", 412), b"never")
    with pytest.raises(PreconditionFailed):
        await choke.call("put", attempt)
    assert attempt.calls == 1
    assert len(sleeps) == 2
