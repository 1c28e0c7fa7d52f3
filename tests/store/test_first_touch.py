"""A queue is claimed when first touched (docs/writers.md, "The open"): what a
failed claim leaves behind, and who shares a claim under way."""

from __future__ import annotations

import asyncio

from tests.store.conftest import Outage, small_config
from tieredstore.errors import ServerError
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore

CONFIG = {"claim_concurrency": 0, "gc_interval": 0}  # claims at first touch only


async def written(backend: ObjectStore) -> None:
    store = await AsyncMessageStore.open(small_config(**CONFIG), store=backend)
    await store.append_batch("t", 0, [b"m%03d" % i for i in range(20)])
    await store.flush()
    await store.close()


async def test_a_touch_after_a_failed_claim_claims_again_while_others_still_wait() -> None:
    """Callers that waited on a claim share its failure; one that comes once it
    failed claims afresh, even while an earlier caller has not had its turn."""
    outage = Outage(MemoryObjectStore(), "/t/0/")
    await written(outage)
    store = await AsyncMessageStore.open(small_config(**CONFIG), store=outage)
    try:
        outage.on = True

        async def first() -> int:
            try:
                return await store.max_offset("t", 0)
            except ServerError:
                outage.on = False  # over: the very next touch must claim again
                return await store.max_offset("t", 0)

        async def second() -> int | BaseException:
            try:
                return await store.max_offset("t", 0)
            except ServerError as exc:  # came before the claim failed: shares it
                return exc

        again, waited = await asyncio.gather(first(), second())
        assert again == 20
        assert isinstance(waited, ServerError)
        assert await store.get("t", 0, 19, 1) and store.corrupt == {}
    finally:
        await store.close()

