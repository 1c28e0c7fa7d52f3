"""The broker's writers registry: every open of a store registers, and its
entry names the store's liveness record (docs/writers.md, "The registry").

    {metadata root}/writers/writer-{seq:020d}     body: writer id, a random nonce

Each open creates the entry after the newest one listed, with ``If-None-Match``
(on 412 it lists again and takes the next; a lost reply is told from another's
entry by the bytes, as for heads). Older entries than the one before ours are
deleted after registering.

Each entry has a liveness record beside it, ``writers/live-{seq:020d}``
(:mod:`tieredstore.metadata.liveness`): written at registering, refreshed
every ``heartbeat_interval`` by the store's background, marked closed at a
clean close. It only informs (an operator's command refuses a live broker
unless told to take it over). Fencing does not read the registry: the log
fence and the writer check do (:mod:`tieredstore.log.gate`).
"""

from __future__ import annotations

import logging
import uuid

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import TieredStoreError
from tieredstore.metadata.liveness import Heartbeat, Seen, newest, record_key, refuse_if_live
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.conditional import create_once
from tieredstore.objectstore.reads import crc_metadata
from tieredstore.store.base.errors import WriterReplaced
from tieredstore.store.formats.keys import metadata_root

log = logging.getLogger(__name__)

REGISTER_ATTEMPTS = 32
KEEP = 2  # entries kept: ours and the one before


class WriterRegistry:
    """This store instance's entry among the broker's writers."""

    def __init__(self, store: ObjectStore, metadata_root: str, writer_id: str,
                 heartbeat_interval: float = 0.0) -> None:
        self.store = store
        self.prefix = f"{metadata_root}/writers/"
        self.writer_id = writer_id
        self.heartbeat_interval = heartbeat_interval
        # Unique to this open: two stores of one process share a writer id.
        self.body = f"{writer_id} {uuid.uuid4().hex}".encode()
        self.seq: int | None = None
        self.heartbeat: Heartbeat | None = None

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
            self.heartbeat = Heartbeat(self.store, record_key(self.prefix, f"{seq:020d}"),
                                       self.writer_id, self.heartbeat_interval)
            await self.heartbeat.beat()
            stale = [key for s in listed if s < seq - KEEP + 1
                     for key in (self._key(s), record_key(self.prefix, f"{s:020d}"))]
            if stale:
                await self.store.delete_many(stale)
            return seq
        raise WriterReplaced(f"could not register among the broker's writers in "
                             f"{REGISTER_ATTEMPTS} attempts: other stores keep opening")

    async def beat(self) -> None:
        """Refresh this store's liveness record (the background's periodic pass)."""
        if self.heartbeat is not None:
            await self.heartbeat.beat()

    async def close(self) -> None:
        """Mark the record closed; best effort: liveness only informs."""
        if self.heartbeat is not None:
            try:
                await self.heartbeat.close()
            except TieredStoreError as exc:
                log.warning("could not mark this store's liveness record closed: %s", exc)


async def writer_seen(store: ObjectStore, config: TieredStoreConfig) -> Seen | None:
    """The liveness record of the newest store that opened ``config``'s broker,
    if it wrote one (one LIST, one GET)."""
    return await newest(store, f"{metadata_root(config)}/writers/")


async def refuse_live_writer(store: ObjectStore, config: TieredStoreConfig) -> None:
    """:class:`WriterLive` while the newest store of ``config``'s broker is live."""
    refuse_if_live(f"broker {config.cluster}/{config.broker}",
                   await writer_seen(store, config))
