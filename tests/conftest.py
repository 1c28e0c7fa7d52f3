"""Shared fixtures: object stores of every backend, S3 servers per session."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server, moto_server, seaweedfs_server
from tieredstore.objectstore import (
    LocalObjectStore,
    MemoryObjectStore,
    ObjectStore,
    S3ObjectStore,
    S3Settings,
)

os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

# The JVMs the tests start (Spark's drivers through spark-submit, its launcher, and
# the standalone cluster's daemons and executors) live seconds: the C2 compiler's
# threads cost them CPU that never pays back. With C1 only, a local session started
# and ran two small jobs in 18-20 s of CPU instead of 28 s here. Only speed changes.
QUICK_JVM = "-XX:TieredStopAtLevel=1"
for _name in ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS"):
    os.environ.setdefault(_name, QUICK_JVM)

_buckets = itertools.count(1)


@pytest.fixture(scope="session")
def moto() -> Iterator[S3Server]:
    with moto_server() as server:
        yield server


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[S3Server]:
    with seaweedfs_server() as server:
        yield server


async def make_s3_store(server: S3Server) -> S3ObjectStore:
    """A store on a fresh bucket of ``server``."""
    store = S3ObjectStore(
        S3Settings(
            bucket=f"test-{os.getpid()}-{next(_buckets)}",
            endpoint_url=server.endpoint_url,
            region="us-east-1",
            addressing_style="path",
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
        )
    )
    await store.create_bucket()
    return store


BACKENDS = ["memory", "local", "moto", "seaweedfs"]


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    """The same test on every backend: memory, local directory, moto, SeaweedFS."""
    backend: ObjectStore
    if request.param == "memory":
        backend = MemoryObjectStore()
    elif request.param == "local":
        backend = LocalObjectStore(tmp_path / "objects", fsync=False)
    else:
        server = request.getfixturevalue(request.param)
        backend = await make_s3_store(server)
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture(params=["memory", "local"])
async def fast_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    """In-process backends only, for tests that make many requests."""
    backend: ObjectStore = (
        MemoryObjectStore()
        if request.param == "memory"
        else LocalObjectStore(tmp_path / "objects", fsync=False)
    )
    yield backend
    await backend.close()


def _uses_seaweedfs(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return "seaweedfs" in getattr(item, "fixturenames", ()) or any(
        isinstance(p, str) and p == "seaweedfs" for p in params)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make unit`` runs two workers), one worker runs the
    tests of SeaweedFS (its ports are fixed: one server a machine serves them)
    and one the rest of Spark's (one JVM at a time on two cores; their waits
    are for Spark's own progress). An item gets one group: two names would
    make a third group, free to run beside either."""
    for item in items:
        if _uses_seaweedfs(item):
            item.add_marker(pytest.mark.xdist_group("seaweedfs"))
        elif item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))
