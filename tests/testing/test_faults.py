"""FaultyObjectStore over the memory backend: each fault kind does what it models,
schedules are reproducible and filtered, injected faults are retried like real ones."""

from __future__ import annotations

import contextlib
import dataclasses
import logging

import pytest

from tieredstore.errors import (
    ConfigError,
    NoSuchUpload,
    ObjectNotFound,
    ObjectStoreError,
    PreconditionFailed,
    RequestTimeout,
    ServerError,
    Throttled,
    TransientError,
)
from tieredstore.objectstore import ByteRange, Chokepoint, MemoryObjectStore, RetryPolicy
from tieredstore.testing import (
    DATA_KINDS,
    FAULT_OPS,
    FaultKind,
    FaultSchedule,
    FaultyObjectStore,
    InjectedFault,
)

BODY = bytes(range(256)) * 4


def chokepoint(attempts: int) -> Chokepoint:
    """Retries without backoff, so the tests stay fast."""
    return Chokepoint(
        RetryPolicy(max_attempts=attempts, base_delay=0.0, max_delay=0.0, timeout=5.0), seed=0
    )


def faulty(
    *kinds: FaultKind, rate: float = 1.0, seed: int = 1, attempts: int = 1, **schedule: object
) -> FaultyObjectStore:
    inner = MemoryObjectStore(chokepoint=chokepoint(1))
    plan = FaultSchedule(
        seed=seed, rate=rate, kinds=frozenset(kinds or FaultKind), **schedule  # type: ignore[arg-type]
    )
    return FaultyObjectStore(inner, plan, chokepoint=chokepoint(attempts))


async def test_reply_lost_put_raises_but_lands() -> None:
    store = faulty(FaultKind.REPLY_LOST)
    with pytest.raises(TransientError):
        await store.put("a/b", BODY)
    assert await store.inner.get("a/b") == BODY
    assert store.log == [InjectedFault("put", "a/b", FaultKind.REPLY_LOST)]


async def test_reply_lost_conditional_put_retried_meets_itself() -> None:
    store = faulty(FaultKind.REPLY_LOST, attempts=3)
    with pytest.raises(PreconditionFailed):
        await store.put("k", BODY, if_none_match=True)
    assert await store.inner.get("k") == BODY
    assert store.metrics.retries["put"] == 1


async def test_reply_lost_complete_multipart_retried_finds_no_upload() -> None:
    store = faulty(FaultKind.REPLY_LOST, attempts=2, ops=frozenset({"complete_multipart"}))
    upload_id = await store.create_multipart("mp")
    part = await store.upload_part("mp", upload_id, 1, BODY)
    with pytest.raises(NoSuchUpload):
        await store.complete_multipart("mp", upload_id, [part])
    assert await store.inner.get("mp") == BODY


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (FaultKind.ERROR_BEFORE, ServerError),
        (FaultKind.SLOW_DOWN, Throttled),
        (FaultKind.TIMEOUT, RequestTimeout),
    ],
)
async def test_faults_before_the_call_write_nothing(
    kind: FaultKind, error: type[ObjectStoreError]
) -> None:
    store = faulty(kind, attempts=3)
    with pytest.raises(error):
        await store.put("x", BODY)
    with pytest.raises(ObjectNotFound):
        await store.inner.head("x")
    assert await store.inner.list_all("") == []
    assert store.injected == {("put", kind): 3}
    assert store.metrics.retries["put"] == 2
    upload_id = await store.inner.create_multipart("mp")
    with pytest.raises(error):
        await store.upload_part("mp", upload_id, 1, BODY)
    assert await store.inner.list_multipart_uploads("") != []


async def test_timeout_waits_timeout_delay() -> None:
    inner = MemoryObjectStore(chokepoint=chokepoint(1))
    plan = FaultSchedule(seed=0, rate=1.0, kinds=frozenset({FaultKind.TIMEOUT}))
    store = FaultyObjectStore(inner, plan, chokepoint=chokepoint(1), timeout_delay=0.02)
    with pytest.raises(RequestTimeout):
        await store.head("x")
    assert store.metrics.latency_sum["head"] >= 0.015


async def test_short_read_returns_fewer_bytes() -> None:
    store = faulty(FaultKind.SHORT_READ)
    await store.inner.put("k", BODY)
    for _ in range(20):
        found = await store.get_object("k")
        assert len(found.data) < len(BODY)
        assert BODY.startswith(found.data)
        assert found.info.size == len(BODY)
    ranged = await store.get("k", ByteRange(100, 50))
    assert len(ranged) < 50 and BODY[100:150].startswith(ranged)
    assert store.injected[("get", FaultKind.SHORT_READ)] == 21


async def test_flip_bits_flips_exactly_one_bit() -> None:
    store = faulty(FaultKind.FLIP_BITS)
    await store.inner.put("k", BODY)
    for _ in range(20):
        got = await store.get("k")
        assert len(got) == len(BODY)
        diff = int.from_bytes(got, "big") ^ int.from_bytes(BODY, "big")
        assert diff.bit_count() == 1


async def test_empty_body_is_not_corrupted() -> None:
    store = faulty(*DATA_KINDS)
    await store.inner.put("empty", b"")
    assert await store.get("empty") == b""
    assert store.log == []


async def run_workload(store: FaultyObjectStore) -> list[str]:
    """The same calls every time; what each one did."""
    outcomes = []
    for i in range(40):
        try:
            await store.put(f"k{i % 5}", BODY)
            outcomes.append(str(len(await store.get(f"k{i % 5}"))))
            outcomes.append(str(len(await store.list_all("k"))))
            await store.head(f"k{i % 5}")
        except ObjectStoreError as exc:
            outcomes.append(type(exc).__name__)
    return outcomes


async def test_same_seed_same_faults() -> None:
    first, second, other = (faulty(rate=0.3, seed=s) for s in (42, 42, 43))
    runs = [await run_workload(store) for store in (first, second, other)]
    assert len(first.log) > 10
    assert first.log == second.log and runs[0] == runs[1]
    assert first.injected == second.injected
    assert first.log != other.log
    first.reset()
    first.inner = MemoryObjectStore(chokepoint=chokepoint(1))  # and start from empty
    assert first.log == [] and not first.injected
    assert await run_workload(first) == runs[0]
    assert first.log == second.log


async def test_injected_errors_are_retried_until_success() -> None:
    store = faulty(FaultKind.ERROR_BEFORE, rate=0.5, seed=3, attempts=20)
    for i in range(20):
        await store.put(f"k{i}", BODY)
        assert await store.inner.get(f"k{i}") == BODY
    faults = store.injected[("put", FaultKind.ERROR_BEFORE)]
    assert faults >= 1
    assert store.metrics.retries["put"] == faults
    assert store.metrics.errors["put:ServerError"] == faults
    assert store.metrics.requests["put"] == 20 + faults
    assert store.inner.metrics.requests["put"] == 20  # nothing reached the inner store twice


async def test_listing_faults_once_per_listing_and_retries_whole() -> None:
    store = faulty(FaultKind.ERROR_BEFORE, FaultKind.REPLY_LOST, seed=5, attempts=50,
                   rate=0.5, ops=frozenset({"list"}))
    for i in range(1500):
        await store.inner.put(f"p/{i:05}", b"x")
    pages = [page async for page in store.list_pages("p/")]
    assert [len(p) for p in pages] == [1000, 500]
    assert store.metrics.retries["list"] == len(store.log)


async def test_disabled_injects_nothing() -> None:
    store = faulty(rate=1.0)
    store.enabled = False
    await store.put("k", BODY)
    assert await store.get("k") == BODY
    assert (await store.head("k")).size == len(BODY)
    assert len(await store.list_all("")) == 1
    upload_id = await store.create_multipart("mp")
    part = await store.upload_part("mp", upload_id, 1, BODY)
    await store.complete_multipart("mp", upload_id, [part])
    assert await store.list_multipart_uploads("") == []
    await store.delete("k")
    assert store.log == [] and not store.injected
    store.enabled = True
    with pytest.raises(ObjectStoreError):
        await store.head("mp")
    assert len(store.log) == 1


async def test_ops_filter() -> None:
    store = faulty(FaultKind.ERROR_BEFORE, ops=frozenset({"get", "list_uploads"}))
    assert store.schedule.ops == frozenset({"get", "list_multipart_uploads"})
    await store.put("k", BODY)
    await store.head("k")
    assert len(await store.list_all("")) == 1
    with pytest.raises(ServerError):
        await store.get("k")
    with pytest.raises(ServerError):
        await store.list_multipart_uploads("")
    assert {f.op for f in store.log} == {"get", "list_multipart_uploads"}


async def test_read_only_kinds_never_hit_other_ops() -> None:
    for op in FAULT_OPS - {"get"}:
        assert FaultSchedule(seed=0, rate=1.0).kinds_for(op) == tuple(
            k for k in FaultKind if k not in DATA_KINDS
        )
    store = faulty(*DATA_KINDS)
    for i in range(50):
        await store.put(f"k{i}", BODY, metadata={"m": "v"})
        await store.head(f"k{i}")
    assert len(await store.list_all("")) == 50
    upload_id = await store.create_multipart("mp")
    part = await store.upload_part_copy("mp", upload_id, 1, "k0", ByteRange(0, 10))
    await store.complete_multipart("mp", upload_id, [part])
    await store.delete_many([f"k{i}" for i in range(50)])
    assert store.log == []
    await store.get("mp")
    assert {f.op for f in store.log} == {"get"}


async def test_max_faults() -> None:
    store = faulty(FaultKind.SLOW_DOWN, max_faults=2)
    for _ in range(2):
        with pytest.raises(Throttled):
            await store.put("k", BODY)
    await store.put("k", BODY)
    assert store.injected == {("put", FaultKind.SLOW_DOWN): 2}


async def test_log_names_no_bodies_or_metadata(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="tieredstore.testing.faults")
    store = faulty(FaultKind.REPLY_LOST, FaultKind.FLIP_BITS, attempts=4)
    secret = b"SECRET-BODY-0123456789"
    with pytest.raises(ObjectStoreError):
        await store.put("k", secret, metadata={"token": "SECRET-META"})
    await store.inner.put("r", secret)
    for _ in range(4):
        with contextlib.suppress(ObjectStoreError):
            await store.get("r")
    assert caplog.records and "'k'" in caplog.text
    assert "SECRET" not in caplog.text
    assert [f.name for f in dataclasses.fields(InjectedFault)] == ["op", "key", "kind"]
    assert {f.key for f in store.log} == {"k", "r"}


@pytest.mark.parametrize(
    "bad",
    [
        {"rate": 1.5},
        {"rate": -0.1},
        {"max_faults": -1},
        {"ops": frozenset({"putt"})},
    ],
)
def test_schedule_validation(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        FaultSchedule(**{"seed": 0, "rate": 0.5, **bad})  # type: ignore[arg-type]


async def test_close_closes_inner_and_name_is_inner_name() -> None:
    store = faulty()
    assert store.name == "memory"
    async with store:
        pass
