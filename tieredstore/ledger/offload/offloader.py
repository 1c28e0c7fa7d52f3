"""LedgerOffloader (PIP-17) and its implementation, Pulsar's object layout on our store.

``offload(handle, uuid, extra_metadata)`` copies a closed ledger to the object
store as PIP-17's two objects; ``read_offloaded`` gives back a
:class:`~tieredstore.ledger.handle.ReadHandle` that reads identically to the
original; ``delete_offloaded`` removes both. The ``uuid`` names one attempt:
the managed ledger records it before the attempt starts, so that a failed
attempt can be cleaned up through it later.

The objects are PIP-17's, at PIP-17's names (docs/ledgers.md, "Offloaded
ledgers"; :mod:`tieredstore.ledger.offload.location`): the data object
``{uuid}-ledger-{id}`` (unpadded blocks of about 1 MiB,
:class:`~tieredstore.ledger.stream.BlockPacker`), written by one PUT or, once
larger than a part, one multipart upload of runs of whole blocks, created
with ``If-None-Match``; then the index ``{uuid}-ledger-{id}-index``, created
with ``If-None-Match``: its presence means the attempt is complete. A lost
reply is settled by the writer's token in the data object's metadata, a
second writer of the same uuid is fenced (:class:`OffloadFenced`), a failed
attempt leaves no multipart upload behind (aborted) and is removed by
``delete_offloaded`` with its uuid.
"""

from __future__ import annotations

import abc
import logging
import secrets
import uuid as uuid_mod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tieredstore.errors import check_field
from tieredstore.ledger.errors import (
    OffloadExists,
    OffloadFenced,
    OffloadRefused,
)
from tieredstore.ledger.format import (
    DEFAULT_BLOCK_SIZE,
    MAX_BLOCK_SIZE,
    MIN_BLOCK_SIZE,
    MIN_POSSIBLE_BLOCK_SIZE,
    LedgerFormatError,
)
from tieredstore.ledger.handle import LedgerState, ReadHandle
from tieredstore.ledger.index import OffloadIndex
from tieredstore.ledger.offload.location import OffloadLocation, OffloadNamespace
from tieredstore.ledger.offload.offloaded import MAX_GET_BYTES, OffloadedReadHandle
from tieredstore.ledger.offload.user_metadata import build_user_metadata, metadata_size
from tieredstore.ledger.stream import BlockPacker
from tieredstore.metrics import OffloadMetrics
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.conditional import create_once
from tieredstore.objectstore.multipart import ObjectWriter
from tieredstore.sizes import MiB

WRITER_KEY = "tieredstore-offload-writer"
"""User metadata of the data object: a random token per ``offload`` call, by
which a retry after a lost reply knows its own object."""

log = logging.getLogger(__name__)

DRIVER_NAME = "tieredstore"


class LedgerOffloader(abc.ABC):
    """PIP-17's ``LedgerOffloader``: copies closed ledgers out, reads them back."""

    @property
    @abc.abstractmethod
    def driver_name(self) -> str:
        """Recorded in the managed ledger's offload context with each offload."""

    @property
    def driver_metadata(self) -> Mapping[str, str]:
        """Where the offloads go (bucket, prefix...), recorded with each offload."""
        return MappingProxyType({})

    @abc.abstractmethod
    async def offload(
        self, handle: ReadHandle, uuid: uuid_mod.UUID, extra_metadata: Mapping[str, str]
    ) -> None:
        """Copy the closed ledger ``handle`` reads; ``uuid`` names this attempt."""

    @abc.abstractmethod
    async def read_offloaded(self, ledger_id: int, uuid: uuid_mod.UUID) -> ReadHandle:
        """A handle that reads the offloaded ledger as the original read."""

    @abc.abstractmethod
    async def delete_offloaded(self, ledger_id: int, uuid: uuid_mod.UUID) -> None:
        """Delete every object of the attempt; nothing there is not an error."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the offloader holds."""


@dataclass(frozen=True, slots=True)
class OffloadOptions:
    """How :class:`SegmentLedgerOffloader` writes and reads.

    ``block_size``: the multipart part size, Pulsar's ``maxBlockSizeInBytes``
    (64 MiB; 5 MiB to 2 GiB): a data object up to it is one PUT, a larger one
    a multipart upload of parts of at least it (one held in memory at a time).
    ``read_block_size``: the PIP-17 data blocks' size (1 MiB, what one
    ranged GET reads an entry with). ``read_batch_bytes``: about how much of
    the ledger one read of the source handle fetches. ``max_get_bytes``: the
    most one GET of a read fetches (adjacent blocks).
    """

    block_size: int = DEFAULT_BLOCK_SIZE
    read_block_size: int = 1 * MiB
    read_batch_bytes: int = 8 * MiB
    max_get_bytes: int = MAX_GET_BYTES
    namespace: OffloadNamespace = field(default_factory=OffloadNamespace)

    def __post_init__(self) -> None:
        check_field("block_size", self.block_size, MIN_BLOCK_SIZE, MAX_BLOCK_SIZE,
                    bounds=f"[{MIN_BLOCK_SIZE}, {MAX_BLOCK_SIZE}] (5 MiB to 2 GiB)")
        check_field("read_block_size", self.read_block_size, MIN_POSSIBLE_BLOCK_SIZE,
                    self.block_size)
        for key in ("read_batch_bytes", "max_get_bytes"):
            check_field(key, getattr(self, key), 1)


class SegmentLedgerOffloader(LedgerOffloader):
    """Offloads ledgers to ``store`` as PIP-17 objects, read back by ranged GETs
    of their blocks."""

    def __init__(self, store: ObjectStore, *, options: OffloadOptions | None = None) -> None:
        self.store = store
        self.options = options or OffloadOptions()
        self.metrics = OffloadMetrics()  # for a collector: TieredStoreCollector(offload=...)

    @property
    def driver_name(self) -> str:
        return DRIVER_NAME

    @property
    def driver_metadata(self) -> Mapping[str, str]:
        space = self.options.namespace
        return MappingProxyType({
            "store": self.store.name,
            "prefix": space.prefix,
        })

    def locate(self, ledger_id: int, uuid: uuid_mod.UUID | str) -> OffloadLocation:
        return self.options.namespace.locate(ledger_id, uuid)

    # --- offload ------------------------------------------------------------------

    async def offload(
        self, handle: ReadHandle, uuid: uuid_mod.UUID, extra_metadata: Mapping[str, str]
    ) -> None:
        """Copy the closed ledger ``handle`` reads; ``uuid`` names this attempt.
        Counted in :attr:`metrics`: a ledger, its entries and bytes once it is
        complete, a failure when it raises."""
        try:
            await self._offload(handle, uuid, extra_metadata)
        except Exception:
            self.metrics.failures += 1
            raise
        self.metrics.ledgers += 1
        self.metrics.entries += handle.last_add_confirmed + 1
        self.metrics.bytes += handle.length

    async def _offload(
        self, handle: ReadHandle, uuid: uuid_mod.UUID, extra_metadata: Mapping[str, str]
    ) -> None:
        ledger_id = handle.ledger_id
        meta = handle.metadata
        if meta.state is not LedgerState.CLOSED:
            raise OffloadRefused(
                f"the ledger is {meta.state.name}: only closed ledgers can be offloaded",
                ledger_id=ledger_id,
            )
        if handle.last_add_confirmed < 0:
            raise OffloadRefused("the ledger is empty: there is nothing to offload",
                                 ledger_id=ledger_id)
        location = self.locate(ledger_id, uuid)
        own = {"ledger-id": str(ledger_id), "offload-uuid": str(location.uuid)}
        user_metadata = build_user_metadata(
            extra_metadata, own, reserved=metadata_size({WRITER_KEY: "0" * 32}),
            ledger_id=ledger_id,
        )
        # One listing: objects of this attempt there are refused, never resumed.
        if {o.key for o in await self.store.list_all(location.data_key)} & set(location.keys):
            raise OffloadExists(f"objects of attempt {location} exist already",
                                ledger_id=ledger_id)
        packer = BlockPacker(block_size=self.options.read_block_size)
        data = ObjectWriter(self.store, location.data_key, part_size=self.options.block_size,
                            metadata={**user_metadata, WRITER_KEY: secrets.token_hex(16)})
        try:
            await self._copy_entries(handle, packer, data)
            if not await data.finish():
                raise OffloadFenced(f"another writer's data object {location.data_name} exists",
                                    ledger_id=ledger_id)
        except BaseException:
            await data.abort()
            raise
        if packer.bytes_written != data.size:
            raise LedgerFormatError(f"ledger {ledger_id}: {data.size} bytes uploaded, the "
                                    f"blocks hold {packer.bytes_written}")
        index = OffloadIndex.for_blocks(packer.blocks, meta.to_bytes())
        await self._put_index(location, index.encode(), user_metadata)
        log.info("offloaded ledger %d as %s: %d entries, %d bytes, %d blocks, %d parts",
                 ledger_id, location, handle.last_add_confirmed + 1, packer.bytes_written,
                 len(packer.blocks), data.parts or 1)

    async def _copy_entries(self, handle: ReadHandle, packer: BlockPacker,
                            data: ObjectWriter) -> None:
        """Read the ledger in batches, pack its entries into blocks, and hand
        the data object a part whenever one is full."""
        last = handle.last_add_confirmed
        average = max(1, handle.length // (last + 1))
        batch = max(1, min(10_000, self.options.read_batch_bytes // average))
        payload = 0
        for first in range(0, last + 1, batch):
            upto = min(last, first + batch - 1)
            entries = await handle.read(first, upto)
            if [e.entry_id for e in entries] != list(range(first, upto + 1)):
                raise LedgerFormatError(
                    f"ledger {handle.ledger_id}: reading entries {first}..{upto} returned "
                    f"ids {[e.entry_id for e in entries][:5]}..."
                )
            for entry in entries:
                payload += len(entry.payload)
                block = packer.add(entry.entry_id, entry.payload)
                if block is not None:
                    await data.write(block)
        if payload != handle.length:
            raise LedgerFormatError(f"ledger {handle.ledger_id}: the entries hold {payload} "
                                    f"bytes, the ledger's length is {handle.length}")
        block = packer.finish()
        if block is not None:
            await data.write(block)

    async def _put_index(
        self, location: OffloadLocation, data: bytes, user_metadata: Mapping[str, str]
    ) -> None:
        # Taken: our own earlier request landed (its answer was lost), or another
        # writer of this attempt got there first: the bytes tell which.
        if not await create_once(self.store, location.index_key, data,
                                 metadata=user_metadata):
            raise OffloadFenced(f"a different index {location.index_name} exists",
                                ledger_id=location.ledger_id)

    # --- read and delete ------------------------------------------------------------

    async def read_offloaded(self, ledger_id: int, uuid: uuid_mod.UUID) -> ReadHandle:
        """A handle on the attempt at PIP-17's names."""
        return await open_offloaded(self.store, self.locate(ledger_id, uuid),
                                    options=self.options)

    async def delete_offloaded(self, ledger_id: int, uuid: uuid_mod.UUID) -> None:
        """Delete the attempt's objects: the index first (an attempt without it
        is never read), then its uploads and data object."""
        location = self.locate(ledger_id, uuid)
        await self.store.delete(location.index_key)
        for upload in await self.store.list_multipart_uploads(location.data_key):
            if upload.key == location.data_key:
                await self.store.abort_multipart(upload.key, upload.upload_id)
        await self.store.delete(location.data_key)


async def open_offloaded(store: ObjectStore, location: OffloadLocation, *,
                         options: OffloadOptions | None = None) -> ReadHandle:
    """A handle on the attempt at PIP-17's names (``OffloadNotFound`` without its index)."""
    options = options or OffloadOptions()
    return await OffloadedReadHandle.open(store, location, max_get_bytes=options.max_get_bytes)

