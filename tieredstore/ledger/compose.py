"""The ledger adapter from the store's configuration: the ``[ledger]`` keys mapped
onto :class:`ManagedLedgerConfig` and :class:`OffloadOptions`, and the local
ledger store and offloader a host (or ``tieredstore ledger``) opens."""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.config import TieredStoreConfig
from tieredstore.ledger.errors import (
    LedgerNotFound,
    ManagedLedgerNotFound,
    OffloadNotFound,
    PositionOutOfRange,
)
from tieredstore.ledger.handle import LedgerEntry
from tieredstore.ledger.local import LocalLedgerStore
from tieredstore.ledger.managed import (
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerMetadata,
    ManagedLedgerPath,
    ReadPriority,
)
from tieredstore.ledger.managed.gc import find_offload_garbage
from tieredstore.ledger.managed.meta import state
from tieredstore.ledger.managed.meta.format import offload_uuid
from tieredstore.ledger.managed.meta.metadata import list_managed_ledgers
from tieredstore.ledger.managed.sources import choose_sources, open_copy
from tieredstore.ledger.offload.location import OffloadNamespace
from tieredstore.ledger.offload.offloader import OffloadOptions, SegmentLedgerOffloader
from tieredstore.metadata.liveness import Seen, newest
from tieredstore.metrics import MetricsServer, TieredStoreCollector
from tieredstore.objectstore import GovernorOptions, ObjectStore
from tieredstore.segment.garbage import Garbage


def managed_ledger_config(config: TieredStoreConfig) -> ManagedLedgerConfig:
    """How managed ledgers roll, offload, keep ledgers and local copies, and read
    (``ledger_*``, ``offload_threshold_*``; None: off)."""
    return ManagedLedgerConfig(
        max_entries_per_ledger=config.ledger_max_entries,
        max_ledger_bytes=config.ledger_max_bytes,
        offload_threshold_bytes=config.offload_threshold_bytes,
        offload_threshold_seconds=config.offload_threshold_time,
        retention_bytes=config.ledger_retention_bytes,
        retention_seconds=config.ledger_retention_time,
        deletion_lag_seconds=config.ledger_deletion_lag,
        sweep_interval_seconds=config.ledger_sweep_interval,
        heartbeat_interval_seconds=config.heartbeat_interval,
        read_priority=ReadPriority(config.ledger_read_priority),
    )


def offload_namespace(config: TieredStoreConfig) -> OffloadNamespace:
    """Where offloads live: under ``offload_prefix``."""
    return OffloadNamespace(config.offload_prefix)


def offload_options(config: TieredStoreConfig) -> OffloadOptions:
    """How offloads are written (``offload_*``)."""
    return OffloadOptions(block_size=config.offload_block_size,
                          namespace=offload_namespace(config))


def offload_garbage(config: TieredStoreConfig, store: ObjectStore
                    ) -> Callable[[datetime], Awaitable[list[Garbage]]]:
    """The offload attempts no managed ledger under ``ledger_root`` records, and
    their leftovers and uploads (:func:`find_offload_garbage`), as a finder of
    the store's garbage collection (``finders``)."""
    return functools.partial(find_offload_garbage, store, offload_namespace(config), store,
                             root=config.ledger_root)


def ledger_dir(config: TieredStoreConfig) -> str:
    """Where the local ledgers are: ``ledger_dir``, else ``<local_path>/ledgers``
    (a relative path is relative to the process's working directory)."""
    return config.ledger_dir or os.path.join(config.local_path, "ledgers")


@dataclass
class LedgerHost:
    """What a host of managed ledgers opens once: the bucket, the local ledgers,
    the offloader; :meth:`open` a managed ledger on them.

    Its metrics (:meth:`metrics_collector`: the bucket's requests, bytes and
    their cost, and the offloader's ``tieredstore_offload_*_total``) are
    served on ``metrics_host``:``metrics_port`` from :meth:`create` to
    :meth:`close` when ``metrics_port`` is set, as a message store serves its
    own; else the host registers the collector where it wants. A process that
    embeds a message store too gives one of them ``metrics_port = 0`` and
    registers its collector beside the other's (``const_labels`` tell their
    request counters apart) or serves each on a port of its own.
    """

    config: TieredStoreConfig
    store: ObjectStore
    ledgers: LocalLedgerStore
    offloader: SegmentLedgerOffloader
    _metrics_server: MetricsServer | None = field(default=None, repr=False)

    @classmethod
    def create(cls, config: TieredStoreConfig, store: ObjectStore,
               ledgers: str | None = None) -> LedgerHost:
        """The host on ``store``, its local ledgers in ``ledgers`` (default
        :func:`ledger_dir`); serving its metrics if ``metrics_port`` is set
        (``ConfigError`` naming ``metrics_port`` if that port cannot be bound)."""
        local = LocalLedgerStore(ledgers or ledger_dir(config), fsync=config.local_fsync)
        host = cls(config, store, local,
                   SegmentLedgerOffloader(store, options=offload_options(config)))
        if config.metrics_port:
            host._metrics_server = MetricsServer.start(
                host.metrics_collector(), config.metrics_host, config.metrics_port)
        return host

    def metrics_collector(self, *, namespace: str = "tieredstore",
                          const_labels: Mapping[str, str] | None = None
                          ) -> TieredStoreCollector:
        """This host's Prometheus collector: its object store's requests, bytes
        and their cost (at ``price_per_1000_put``/``_get``) and its offloader's
        counters (docs/metrics.md, Ledger offload)."""
        return TieredStoreCollector(store=self.store.metrics, offload=self.offloader.metrics,
                                    prices=self.config.options(GovernorOptions).prices,
                                    namespace=namespace, const_labels=const_labels)

    @property
    def ledger_dir(self) -> str:
        """The absolute path of the local ledgers' directory (:func:`ledger_dir`)."""
        return os.path.abspath(self.ledgers.root)

    @property
    def metrics_port(self) -> int | None:
        """The port of the metrics endpoint the host serves, if it serves one."""
        return None if self._metrics_server is None else self._metrics_server.port

    async def open(self, name: str, *, writer_id: str = "", appending: bool = True,
                   take_over: bool = True) -> ManagedLedger:
        """Open (or create) ``name``, taking it over from any other owner (with
        ``take_over=False``: :class:`WriterLive` while that owner is live); with
        ``appending=False`` (offload, trim, sweep only) start no new ledger."""
        return await ManagedLedger.open(
            name, metadata_store=self.store, ledgers=self.ledgers, offloader=self.offloader,
            config=managed_ledger_config(self.config), root=self.config.ledger_root,
            writer_id=writer_id, appending=appending, take_over=take_over)

    # --- read-only: never takes a managed ledger over ----------------------------------

    async def owner_seen(self, name: str) -> Seen | None:
        """The liveness record of ``name``'s newest owner, if one wrote it."""
        return await newest(self.store, ManagedLedgerPath(self.config.ledger_root, name).base)

    async def _metadata(self, name: str) -> ManagedLedgerMetadata:
        meta = await ManagedLedgerMetadata.open(self.store,
                                                ManagedLedgerPath(self.config.ledger_root, name))
        if meta.version == 0:
            raise ManagedLedgerNotFound("no such managed ledger", name=name)
        return meta

    async def managed_ledgers(self) -> list[str]:
        """The names of the managed ledgers with metadata under ``ledger_root``, in
        order (the listing the offload sweep goes by)."""
        return [path.name for path in await list_managed_ledgers(self.store,
                                                                 self.config.ledger_root)]

    async def ledger_rows(self, name: str) -> list[LedgerRow]:
        """The live ledgers of ``name`` as its newest metadata records them, each
        ``local`` only if this host's ledger directory holds its copy (one the
        metadata keeps that is not there is ``local_missing``). The metadata
        records a ledger's entries and bytes when it closes: for the open one
        they are what its local log holds now (read without fencing its
        writer), None when this host has no local copy of it."""
        meta = await self._metadata(name)
        rows = [await self._here(_row(meta, info)) async for info in meta.ledgers()]
        return [await self._open_row(r) if r.state == "open" else r for r in rows]

    async def _here(self, row: LedgerRow) -> LedgerRow:
        """``row`` with ``local`` as this host's ledger directory has it."""
        if not row.local or await self.ledgers.exists(row.ledger_id):
            return row
        return replace(row, local=False, local_missing=True)

    async def _open_row(self, row: LedgerRow) -> LedgerRow:
        try:
            handle = await self.ledgers.open_ledger(row.ledger_id)
        except LedgerNotFound:
            return replace(row, entries=None, size=None)
        try:
            return replace(row, entries=handle.last_add_confirmed + 1, size=handle.length)
        finally:
            await handle.close()

    async def read(self, name: str, ledger_id: int, first: int, last: int | None
                   ) -> list[LedgerEntry]:
        """Entries ``first`` to ``last`` inclusive (None: to the end) of a closed
        ledger of ``name``: from its offload when complete, else from the local
        copy. Entries the ledger does not hold are an error naming what it holds,
        ``[0, end)``; from its end (``first`` = end, or ``last`` = ``first`` - 1)
        there is nothing to read. A copy not found is read as trimmed
        (:class:`PositionOutOfRange`) when the newest metadata, loaded again, no
        longer holds the ledger: its owner trimmed it after the first load."""
        meta = await self._metadata(name)
        info = await meta.ledger(ledger_id)
        if info is None or not state.is_sealed(meta.head, info):
            raise PositionOutOfRange(f"ledger {ledger_id} is not a closed ledger of it",
                                     name=name)
        source = choose_sources(info, ReadPriority.TIERED_STORAGE_FIRST)[0]
        try:
            handle = await open_copy(source, info, self.ledgers, self.offloader)
            try:
                held = handle.last_add_confirmed + 1
                end = held if last is None else last + 1
                if not 0 <= first <= end <= held:
                    raise PositionOutOfRange(f"ledger {ledger_id} holds entries [0, {held}): "
                                             f"cannot read entries [{first}, {end})", name=name)
                return await handle.read(first, end - 1) if first < end else []
            finally:
                await handle.close()
        except (LedgerNotFound, OffloadNotFound) as exc:
            now = await self._metadata(name)
            if await now.ledger(ledger_id) is None:
                raise PositionOutOfRange(
                    f"ledger {ledger_id} was trimmed while it was read (the first ledger is "
                    f"now {now.head.firstLedgerId})", name=name) from exc
            raise

    async def close(self) -> None:
        """Close the offloader and stop serving metrics (the store is the caller's)."""
        try:
            await self.offloader.close()
        finally:
            if self._metrics_server is not None:
                self._metrics_server.stop()
                self._metrics_server = None


def _row(meta: ManagedLedgerMetadata, info: pb.LedgerInfo) -> LedgerRow:
    uuid = offload_uuid(info)
    ctx = info.offloadContext
    return LedgerRow(info.ledgerId,
                     "open" if info.ledgerId == state.open_ledger_id(meta.head) else "closed",
                     info.entries, info.size, state.is_offloaded(info),
                     None if uuid is None else str(uuid), not ctx.bookkeeperDeleted,
                     state.offload_state(info), ctx.failure if ctx.HasField("failure") else None)


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One ledger of a managed ledger, as ``tieredstore ledger list`` shows it."""

    ledger_id: int
    state: str  # "open" (the current ledger) or "closed"
    entries: int | None  # open: in its local log now (None: no local copy here)
    size: int | None  # the entries' payload bytes, likewise
    offloaded: bool  # its offload is recorded complete
    offload_uuid: str | None  # the latest attempt recorded
    local: bool  # its local copy is kept (not deleted after the lag) and here
    offload: str = "none"  # none, in progress, failed, complete (state.offload_state)
    failure: str | None = None  # the recorded failure of the latest attempt
    # the metadata keeps its local copy, but this host's ledger directory does not
    # hold it (another host's, another directory's, or lost)
    local_missing: bool = False
