"""The managed ledger's cache of open read handles: every handle it lets go of
is closed, also when two reads of one ledger open handles at once."""

from __future__ import annotations

import asyncio

from tieredstore.ledger.managed.sources import HandleCache, LedgerCopy


class Handle:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        await asyncio.sleep(0)  # a close that awaits, as a real one does
        self.closed = True


async def test_two_puts_of_one_ledger_at_once_close_the_handle_they_replace() -> None:
    cache = HandleCache(4)
    handles = [Handle() for _ in range(3)]
    await cache.put(LedgerCopy.LOCAL, 1, handles[0])  # type: ignore[arg-type]
    await asyncio.gather(cache.put(LedgerCopy.LOCAL, 1, handles[1]),  # type: ignore[arg-type]
                         cache.put(LedgerCopy.LOCAL, 1, handles[2]))  # type: ignore[arg-type]
    held = cache.get(LedgerCopy.LOCAL, 1)
    assert held in handles and not held.closed  # type: ignore[union-attr]
    assert all(h.closed for h in handles if h is not held), "a replaced handle stays open"


async def test_handles_past_the_capacity_are_closed_least_recent_first() -> None:
    cache = HandleCache(2)
    handles = [Handle() for _ in range(3)]
    for ledger_id, handle in enumerate(handles):
        await cache.put(LedgerCopy.OFFLOADED, ledger_id, handle)  # type: ignore[arg-type]
    assert [h.closed for h in handles] == [True, False, False]
    await cache.close()
    assert all(h.closed for h in handles)
