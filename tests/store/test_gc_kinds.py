"""Garbage collection of what lies outside a queue's own files: the log objects of a
broker no longer running, and offload attempts no managed ledger records with
their multipart uploads; a dry run lists them and deletes nothing."""

from __future__ import annotations

import uuid as uuid_mod
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.ledger.helpers import make_ledger
from tests.store.conftest import small_config
from tieredstore.ledger import (
    LocalLedgerStore,
    SegmentLedgerOffloader,
    offload_garbage,
    offload_options,
)
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.segment.garbage import DEAD_LOG, LOG_FENCE, UNREFERENCED, UPLOAD
from tieredstore.store import AsyncMessageStore, collect_garbage

T0 = 1_700_000_000_000
SOON = timedelta(seconds=1)  # "now" a little later: every object is older


async def keys(backend: ObjectStore) -> set[str]:
    return {o.key for o in await backend.list_all("")}


async def uploads(backend: ObjectStore) -> set[str]:
    return {u.upload_id for u in await backend.list_multipart_uploads("")}


async def test_the_log_objects_of_a_broker_no_longer_running() -> None:
    backend = MemoryObjectStore()
    gone = small_config(broker="broker-gone", gc_interval=0)
    for batch in range(3):  # three opens: three log fences; spent and live log objects
        store = await AsyncMessageStore.open(gone, store=backend)
        for i in range(40):
            await store.append("t", i % 2, b"m" * 300, timestamp=T0 + batch * 100 + i)
        await store.flush()
        if batch < 2:
            await store.compact_log(now=T0 / 1000 + 10**6)  # its pieces move into chunks
        await store.close()
    log_keys = sorted(k for k in await keys(backend) if "/broker-gone/log/log-" in k)
    running = small_config(broker="broker-running", gc_interval=0)
    now = datetime.now(UTC) + SOON
    before, open_uploads = await keys(backend), await uploads(backend)
    dry = await collect_garbage(backend, running, safety_age=0, dry_run=True, now=now)
    assert await keys(backend) == before and await uploads(backend) == open_uploads
    assert dry.deleted == 0
    found = {g.key: g.kind for g in dry.found}
    assert set(found.values()) == {DEAD_LOG, LOG_FENCE}, dry.found
    assert set(found) < set(log_keys) and log_keys[-1] not in found  # never the newest
    done = await collect_garbage(backend, running, safety_age=0, now=now)
    assert [(g.kind, g.key) for g in done.found] == [(g.kind, g.key) for g in dry.found]
    assert await keys(backend) == before - set(found)
    # Nothing its queues need went: every message reads back, read-only.
    reader = await AsyncMessageStore.open_read_only(gone, store=backend)
    for queue in (0, 1):
        got = await reader.get("t", queue, 0, max_count=1000)
        assert len(got) == 60
    await reader.close()
    assert (await collect_garbage(backend, running, safety_age=0, now=now)).found == []


async def test_offload_attempts_no_metadata_records_and_their_uploads(tmp_path: Path) -> None:
    backend = MemoryObjectStore()
    config = small_config(gc_interval=0)
    offloader = SegmentLedgerOffloader(backend, options=offload_options(config))
    ledger = await make_ledger(LocalLedgerStore(tmp_path / "ledgers", fsync=False),
                               [b"x" * 100, b"y" * 200])
    orphan = uuid_mod.uuid4()
    await offloader.offload(ledger, orphan, {})  # a dead owner's: no managed ledger records it
    location = offloader.locate(ledger.ledger_id, orphan)
    upload = await backend.create_multipart(location.data_key)  # a second upload, abandoned
    assert {k for k in await keys(backend) if k in location.keys} == set(location.keys)
    now = datetime.now(UTC) + SOON
    finder = offload_garbage(config, backend)
    before, open_uploads = await keys(backend), await uploads(backend)
    dry = await collect_garbage(backend, config, safety_age=0, dry_run=True, now=now,
                                finders=[finder])
    assert [(g.kind, g.key) for g in dry.found] == [
        (UNREFERENCED, location.data_key), (UPLOAD, f"{location.data_key}#{upload}")]
    assert await keys(backend) == before and await uploads(backend) == open_uploads
    done = await collect_garbage(backend, config, safety_age=0, now=now, finders=[finder])
    assert done.deleted == 2
    assert not [k for k in await keys(backend) if k in location.keys]
    assert upload not in await uploads(backend)
    # Young: left alone.
    again = uuid_mod.uuid4()
    await offloader.offload(ledger, again, {})
    assert (await collect_garbage(backend, config, safety_age=3600,
                                  finders=[finder])).found == []
