"""A message store on memory, a local directory and moto, with small segments."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.conftest import make_s3_store
from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import ServerError
from tieredstore.objectstore import LocalObjectStore, MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore
from tieredstore.testing import ForwardingObjectStore

KiB = 1024


def small_config(**overrides: Any) -> TieredStoreConfig:
    """Small segments; historical timestamps accepted (tests append at fixed times
    such as ``1_700_000_000_000``); an S3 bucket is created when missing."""
    base: dict[str, Any] = {
        "backend": "memory", "chunk_size": 4 * KiB, "commit_log_max_size": 32 * KiB,
        "consume_queue_max_size": 32 * 64, "pool_bytes": 256 * KiB,
        "max_message_size": 16 * KiB, "group_commit_interval": 0.02,
        "metadata_page_size": 4, "timestamp_before_max": float("inf"),
        "s3_create_bucket": True,
    }
    if "max_message_size" not in overrides and "commit_log_max_size" in overrides:
        base["max_message_size"] = min(base["max_message_size"],
                                       overrides["commit_log_max_size"])
    base.update(overrides)
    return load_config(env={}, **base)


Opener = Callable[..., Awaitable[AsyncMessageStore]]


@pytest.fixture(params=["memory", "local", "moto"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    """One object store per test, kept across reopens of the message store."""
    store: ObjectStore
    if request.param == "memory":
        store = MemoryObjectStore()
    elif request.param == "local":
        store = LocalObjectStore(tmp_path / "data", fsync=False)
    else:
        store = await make_s3_store(request.getfixturevalue("moto"))
    yield store
    await store.close()


@pytest.fixture
def open_store(backend: ObjectStore) -> Opener:
    async def opener(**overrides: Any) -> AsyncMessageStore:
        return await AsyncMessageStore.open(small_config(**overrides), store=_Unclosable(backend))
    return opener


class _Unclosable(ObjectStore):
    """Delegates to the backend but lets the test reopen after close()."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(chokepoint=inner.chokepoint)
        self.inner = inner
        self.name = inner.name

    def __getattribute__(self, name: str) -> Any:
        if name in ("inner", "close", "chokepoint", "metrics", "name", "__class__",
                    "__aenter__", "__aexit__"):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "inner"), name)

    async def close(self) -> None:
        return None

    # abstract methods are served by __getattribute__
    put = get_object = head = list_pages = delete_many = None  # type: ignore[assignment]
    create_multipart = upload_part = upload_part_copy = None  # type: ignore[assignment]
    complete_multipart = abort_multipart = list_multipart_uploads = None  # type: ignore[assignment]


T = TypeVar("T")


class Outage(ForwardingObjectStore):
    """Requests (of ``ops``, default all) for keys containing ``part`` fail with
    a 500 while ``on``."""

    def __init__(self, inner: ObjectStore, part: str, *, ops: frozenset[str] | None = None,
                 on: bool = False) -> None:
        super().__init__(inner)
        self.part = part
        self.ops = ops
        self.on = on

    async def _forward(self, op: str, key: str, call: Callable[[], Awaitable[T]], *,
                       bytes_up: int = 0) -> T:
        if self.on and self.part in key and (self.ops is None or op in self.ops):
            raise ServerError(f"outage: {op} {key}")
        return await call()
