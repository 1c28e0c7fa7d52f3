"""Which store instance writes a broker's queues: the newest open wins, also for
queues it never held.

Fencing a queue takes its claim (docs/format.md, Writers): a store replaced by
a newer one is fenced on every queue it held. A queue it never held (one its
successor created after taking over) it would open and claim lazily, fencing
the successor there. So every open of a store registers it first, and a store
checks it is still the newest before it claims a queue lazily, and again after:

    {metadata root}/writers/writer-{seq:020d}     body: writer id, a random nonce

Each open creates the entry after the newest one listed, with ``If-None-Match``
(on 412 it lists again and takes the next; a lost reply is told from another's
entry by the bytes, as for heads). A store whose entry is no longer the newest
refuses to open a queue it does not hold, with :class:`WriterReplaced`. Older
entries than the one before ours are deleted after registering.

The two checks around a lazy claim leave one race: a replaced store that
checked just before its successor registered, and claims just after the
successor created that queue, fences the successor there; its own check after
the claim then fails, and it gives the queue up without writing.
"""

from __future__ import annotations

import logging
import uuid

from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.conditional import create_once
from tieredstore.objectstore.reads import crc_metadata

log = logging.getLogger(__name__)

REGISTER_ATTEMPTS = 32
KEEP = 2  # entries kept: ours and the one before


class WriterReplaced(MetadataFenced):
    """A newer store instance took this broker's queues over: this one opens none."""


class WriterRegistry:
    """This store instance's entry among the broker's writers."""

    def __init__(self, store: ObjectStore, metadata_root: str, writer_id: str) -> None:
        self.store = store
        self.prefix = f"{metadata_root}/writers/"
        self.writer_id = writer_id
        # Unique to this open: two stores of one process share a writer id.
        self.body = f"{writer_id} {uuid.uuid4().hex}".encode()
        self.seq: int | None = None

    def _key(self, seq: int) -> str:
        return f"{self.prefix}writer-{seq:020d}"

    async def _listed(self) -> list[int]:
        out: list[int] = []
        for info in await self.store.list_all(self.prefix):
            name = info.key[len(self.prefix):]
            if name.startswith("writer-") and name[7:].isdigit():
                out.append(int(name[7:]))
        return sorted(out)

    async def register(self) -> int:
        """Create the entry after the newest listed; returns its sequence number."""
        body = self.body
        for _ in range(REGISTER_ATTEMPTS):
            listed = await self._listed()
            seq = listed[-1] + 1 if listed else 0
            if not await create_once(self.store, self._key(seq), body,
                                     metadata=crc_metadata(body)):
                continue  # another store took this number: the next one
            self.seq = seq
            stale = [self._key(s) for s in listed if s < seq - KEEP + 1]
            if stale:
                await self.store.delete_many(stale)
            return seq
        raise WriterReplaced(f"could not register among the broker's writers in "
                             f"{REGISTER_ATTEMPTS} attempts: other stores keep opening")

    async def check(self) -> None:
        """Raise :class:`WriterReplaced` if a newer store registered since."""
        if self.seq is None:
            return
        listed = await self._listed()
        if listed and listed[-1] > self.seq:
            raise WriterReplaced(f"a newer store (writer entry {listed[-1]}, ours {self.seq}) "
                                 "took this broker's queues over")
