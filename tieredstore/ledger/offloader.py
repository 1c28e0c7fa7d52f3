"""LedgerOffloader (PIP-17) and its implementation on the segment engine.

``offload(handle, uuid, extra_metadata)`` copies a closed ledger to the object
store as PIP-17's two objects; ``read_offloaded`` gives back a
:class:`~tieredstore.ledger.handle.ReadHandle` that reads identically to the
original; ``delete_offloaded`` removes both. The ``uuid`` names one attempt:
the managed ledger records it before the attempt starts, so that a failed
attempt can be cleaned up through it later.

How the objects map onto the segment engine (docs/format.md, "Offloaded
ledgers"): the data object's bytes are the logical bytes of one segment
(see :mod:`tieredstore.ledger.location` for its keys). The blocks are
streamed from the ledger (:class:`~tieredstore.ledger.stream.BlockStreamWriter`)
into ``commit0``: chunk objects written with ``If-None-Match`` (so a second
writer of the same attempt with other bytes is fenced), each with its CRC32C.
Sealing merges them into the one ``segment`` object by multipart upload,
copying chunks server-side; that object is the PIP-17 data bytes followed by
our unit table, so every offset the index names is the same in both. The
index object is written last, with ``If-None-Match``: its presence means the
attempt is complete. A failed attempt leaves no multipart upload behind (the
engine aborts it) and is removed by ``delete_offloaded`` with its uuid.
"""

from __future__ import annotations

import abc
import logging
import uuid as uuid_mod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tieredstore.errors import check_field
from tieredstore.fetcher import Fetcher
from tieredstore.ledger.errors import OffloadExists, OffloadFenced, OffloadRefused
from tieredstore.ledger.format import (
    DEFAULT_BLOCK_SIZE,
    MAX_BLOCK_SIZE,
    MIN_BLOCK_SIZE,
    LedgerFormatError,
)
from tieredstore.ledger.handle import LedgerState, ReadHandle
from tieredstore.ledger.index import OffloadIndex
from tieredstore.ledger.location import OffloadLocation, OffloadNamespace
from tieredstore.ledger.offloaded import DEFAULT_SCAN_BYTES, OffloadedReadHandle
from tieredstore.ledger.stream import BlockStreamWriter
from tieredstore.ledger.user_metadata import build_user_metadata, metadata_size
from tieredstore.metrics import OffloadMetrics
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.conditional import create_once
from tieredstore.segment.chunked import ChunkedSegment, SegmentOptions, destroy_segment
from tieredstore.segment.merge import FORMAT_METADATA
from tieredstore.segment.reader import SegmentReader
from tieredstore.sizes import MiB

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

    ``block_size``: PIP-17's ``maxBlockSizeInBytes`` (64 MiB; 5 MiB to 2 GiB).
    ``chunk_size``: the engine's chunk and read unit (8 MiB; chunks of 5 MiB or
    more merge by server-side copy). ``read_batch_bytes``: about how much of
    the ledger one read of the source handle fetches. ``scan_bytes``: how
    much an offloaded handle decodes at a time.
    """

    block_size: int = DEFAULT_BLOCK_SIZE
    chunk_size: int = 8 * MiB
    read_batch_bytes: int = 8 * MiB
    scan_bytes: int = DEFAULT_SCAN_BYTES
    merge_concurrency: int = 4
    namespace: OffloadNamespace = field(default_factory=OffloadNamespace)

    def __post_init__(self) -> None:
        check_field("block_size", self.block_size, MIN_BLOCK_SIZE, MAX_BLOCK_SIZE,
                    bounds=f"[{MIN_BLOCK_SIZE}, {MAX_BLOCK_SIZE}] (5 MiB to 2 GiB)")
        for key in ("chunk_size", "read_batch_bytes", "scan_bytes", "merge_concurrency"):
            check_field(key, getattr(self, key), 1)


class SegmentLedgerOffloader(LedgerOffloader):
    """Offloads ledgers to ``store`` through the segment engine.

    ``reader`` serves the reads of offloaded handles and of the merge: a
    :class:`~tieredstore.fetcher.Fetcher` shared with the host, or, by default,
    one of the offloader's own (closed by :meth:`close`), so that reads get
    its caches and read-ahead either way.
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        reader: SegmentReader | None = None,
        options: OffloadOptions | None = None,
    ) -> None:
        self.store = store
        self._own_fetcher: Fetcher | None = None
        if reader is None:
            reader = self._own_fetcher = Fetcher(store)
        self.reader: SegmentReader = reader
        self.options = options or OffloadOptions()
        self.metrics = OffloadMetrics()  # for a collector: TieredStoreCollector(offload=...)

    async def close(self) -> None:
        # docstring inherited
        if self._own_fetcher is not None:
            await self._own_fetcher.close()

    @property
    def driver_name(self) -> str:
        return DRIVER_NAME

    @property
    def driver_metadata(self) -> Mapping[str, str]:
        space = self.options.namespace
        return MappingProxyType({
            "store": self.store.name,
            "prefix": space.prefix,
            "cluster": space.cluster,
            "namespace": space.namespace,
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
            extra_metadata, own, reserved=metadata_size(FORMAT_METADATA), ledger_id=ledger_id
        )
        options = SegmentOptions(
            chunk_size=self.options.chunk_size,
            merge_on_seal=True,
            merge_concurrency=self.options.merge_concurrency,
            merged_metadata=tuple(sorted(user_metadata.items())),
        )
        # One listing, as opening the segment would make, but without its
        # recovery: objects of this attempt there are refused, never resumed.
        if await self.store.list_all(location.attempt_prefix):
            raise OffloadExists(f"objects of attempt {location} exist already",
                                ledger_id=ledger_id)
        segment = ChunkedSegment(self.store, location.path, options=options, reader=self.reader)
        writer = BlockStreamWriter(
            last_entry_id=handle.last_add_confirmed,
            length=handle.length,
            block_size=self.options.block_size,
        )
        await self._copy_entries(handle, writer, segment)
        await segment.seal()
        index = OffloadIndex.for_blocks(writer.blocks, meta.to_bytes())
        await self._put_index(location, index.encode(), user_metadata)
        log.info("offloaded ledger %d as %s: %d entries, %d bytes, %d blocks", ledger_id,
                 location, handle.last_add_confirmed + 1, writer.bytes_written,
                 len(writer.blocks))

    async def _copy_entries(
        self, handle: ReadHandle, writer: BlockStreamWriter, segment: ChunkedSegment
    ) -> None:
        """Read the ledger in batches, stream its blocks into whole chunks (the
        last one may be short)."""
        chunk = self.options.chunk_size
        pending = bytearray()
        position = 0  # our own count: commit0 refuses it if the segment moved under us
        last = handle.last_add_confirmed
        average = max(1, handle.length // (last + 1))
        batch = max(1, min(10_000, self.options.read_batch_bytes // average))
        for first in range(0, last + 1, batch):
            upto = min(last, first + batch - 1)
            entries = await handle.read(first, upto)
            if [e.entry_id for e in entries] != list(range(first, upto + 1)):
                raise LedgerFormatError(
                    f"ledger {handle.ledger_id}: reading entries {first}..{upto} returned "
                    f"ids {[e.entry_id for e in entries][:5]}..."
                )
            for entry in entries:
                for piece in writer.add(entry.entry_id, entry.payload):
                    pending += piece
            whole = len(pending) - len(pending) % chunk
            if whole:
                await segment.commit0(position, bytes(memoryview(pending)[:whole]))
                position += whole
                del pending[:whole]
        for piece in writer.finish():
            pending += piece
        if pending:
            await segment.commit0(position, bytes(pending))

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

    async def read_offloaded(self, ledger_id: int, uuid: uuid_mod.UUID) -> OffloadedReadHandle:
        # docstring inherited
        return await OffloadedReadHandle.open(
            self.store, self.locate(ledger_id, uuid), reader=self.reader,
            scan_bytes=self.options.scan_bytes,
        )

    async def delete_offloaded(self, ledger_id: int, uuid: uuid_mod.UUID) -> None:
        """Delete the attempt's objects: the index first (an attempt without it
        is never read), then the segment with its chunks, marker and uploads."""
        location = self.locate(ledger_id, uuid)
        await self.store.delete(location.index_key)
        await destroy_segment(self.store, location.path)
        self.reader.forget(location.path)
        # Anything else under the attempt's prefix is the attempt's too.
        leftovers = [o.key for o in await self.store.list_all(location.attempt_prefix)]
        if leftovers:
            await self.store.delete_many(leftovers)
