"""Memory and local backends against a plain dict: a Hypothesis state machine.

The model is a ``dict[str, bytes]`` and a few lines of S3 rules written out
here, not taken from the code under test. Every step runs on both backends
and both must answer as the model does.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tieredstore.errors import InvalidRequest, ObjectNotFound, PreconditionFailed
from tieredstore.objectstore import ByteRange, LocalObjectStore, MemoryObjectStore, ObjectStore

T = TypeVar("T")

# Key components chosen to trip up a file-backed store: escapes, spaces,
# non-ASCII, a '-' that sorts before '/', names that are prefixes of others.
_COMPONENTS = ["a", "b", "ab", "a-b", "a b", "%41", "+", "\u00e9", "x.y"]
keys = st.lists(st.sampled_from(_COMPONENTS), min_size=1, max_size=3).map("/".join)
# Prefixes: whole keys, "directories", and strings that stop mid-component.
prefixes = st.one_of(
    keys,
    keys.map(lambda k: k + "/"),
    st.text(alphabet="ab/-%\u00e9 ", max_size=5),
)
bodies = st.binary(max_size=64)


def _expected_range(data: bytes, start: int, length: int) -> bytes | type[Exception]:
    """S3's ranged GET: a start at or past the end is refused, a long end clipped."""
    if start >= len(data):
        return InvalidRequest
    return data[start : start + length]


class ObjectStoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # One loop for this run of the machine; the local store's worker
        # threads belong to it and are shut down with it.
        self.loop = asyncio.new_event_loop()
        self.root = tempfile.mkdtemp(prefix="tieredstore-model-")
        self.stores: list[ObjectStore] = [
            MemoryObjectStore(),
            LocalObjectStore(self.root, fsync=False),
        ]
        self.model: dict[str, bytes] = {}

    def teardown(self) -> None:
        try:
            for store in self.stores:
                self.run(store.close())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)

    def run(self, aw: Awaitable[T]) -> T:
        async def wrap() -> T:
            return await aw

        return self.loop.run_until_complete(wrap())

    def each(self, call: str, *args: object, **kwargs: object) -> list[object]:
        """Run ``store.<call>(...)`` on every store; exceptions become results."""
        out: list[object] = []
        for store in self.stores:
            try:
                out.append(self.run(getattr(store, call)(*args, **kwargs)))
            except Exception as exc:  # compared by type below
                out.append(exc)
        return out

    def expect(self, results: list[object], expected: object) -> None:
        for store, got in zip(self.stores, results, strict=True):
            if isinstance(expected, type) and issubclass(expected, Exception):
                assert isinstance(got, expected), f"{store.name}: expected {expected}, got {got!r}"
            else:
                assert got == expected, f"{store.name}: expected {expected!r}, got {got!r}"

    # --- rules --------------------------------------------------------------

    @rule(key=keys, data=bodies)
    def put(self, key: str, data: bytes) -> None:
        for got in self.each("put", key, data):
            assert not isinstance(got, Exception), got
        self.model[key] = data

    @rule(key=keys, data=bodies)
    def put_if_none_match(self, key: str, data: bytes) -> None:
        results = self.each("put", key, data, if_none_match=True)
        if key in self.model:
            self.expect(results, PreconditionFailed)
        else:
            for got in results:
                assert not isinstance(got, Exception), got
            self.model[key] = data

    @rule(key=keys, data=bodies, if_none_match=st.booleans())
    def multipart_of_one_part(self, key: str, data: bytes, if_none_match: bool) -> None:
        taken = if_none_match and key in self.model
        for store in self.stores:

            async def upload(store: ObjectStore = store) -> None:
                upload_id = await store.create_multipart(key)
                try:
                    part = await store.upload_part(key, upload_id, 1, data)
                    await store.complete_multipart(
                        key, upload_id, [part], if_none_match=if_none_match
                    )
                except PreconditionFailed:
                    await store.abort_multipart(key, upload_id)
                    assert taken, f"{store.name}: {key!r} is free, complete refused it"
                else:
                    assert not taken, f"{store.name}: complete overwrote {key!r}"

            self.run(upload())
        if not taken:
            self.model[key] = data

    @rule(key=keys)
    def get_whole(self, key: str) -> None:
        results = self.each("get", key)
        self.expect(results, self.model.get(key, ObjectNotFound))

    @precondition(lambda self: bool(self.model))
    @rule(
        data=st.data(),
        start=st.integers(min_value=0, max_value=80),
        length=st.integers(min_value=1, max_value=80),
    )
    def get_range_of_existing(self, data: st.DataObject, start: int, length: int) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        results = self.each("get", key, ByteRange(start, length))
        self.expect(results, _expected_range(self.model[key], start, length))

    @rule(key=keys, start=st.integers(min_value=0, max_value=8))
    def get_range_of_any(self, key: str, start: int) -> None:
        results = self.each("get", key, ByteRange(start, 4))
        if key not in self.model:
            self.expect(results, ObjectNotFound)
        else:
            self.expect(results, _expected_range(self.model[key], start, 4))

    @rule(key=keys)
    def head(self, key: str) -> None:
        for store, got in zip(self.stores, self.each("head", key), strict=True):
            if key not in self.model:
                assert isinstance(got, ObjectNotFound), f"{store.name}: {got!r}"
            else:
                assert not isinstance(got, Exception), f"{store.name}: {got!r}"
                assert getattr(got, "size", None) == len(self.model[key]), store.name

    @rule(doomed=st.lists(keys, max_size=4))
    def delete_many(self, doomed: list[str]) -> None:
        self.expect(self.each("delete_many", doomed), None)
        for key in doomed:
            self.model.pop(key, None)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def delete_existing(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        self.expect(self.each("delete", key), None)
        del self.model[key]

    @rule(prefix=prefixes)
    def list_prefix(self, prefix: str) -> None:
        expected = sorted(
            (k, len(v)) for k, v in self.model.items() if k.startswith(prefix)
        )
        for store in self.stores:
            got = [(o.key, o.size) for o in self.run(store.list_all(prefix))]
            assert got == expected, f"{store.name}: list {prefix!r}"

    @invariant()
    def everything_is_listed(self) -> None:
        expected = sorted(self.model)
        for store in self.stores:
            got = [o.key for o in self.run(store.list_all(""))]
            assert got == expected, f"{store.name}: listing differs from the model"
            assert self.run(store.list_multipart_uploads("")) == [], store.name


ObjectStoreModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestObjectStoreModel = pytest.mark.filterwarnings("error::ResourceWarning")(
    ObjectStoreModel.TestCase
)
