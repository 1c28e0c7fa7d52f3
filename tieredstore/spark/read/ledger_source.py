"""``spark.read.format("tieredstore-ledger")``: offloaded ledgers as rows.

Columns: ``managed_ledger`` string (null when the offload did not name it),
``ledger_id`` long, ``entry_id`` long, ``payload`` binary, ``offload_uuid``
string. One input partition per ``blocks_per_partition`` PIP-17 blocks
(16: blocks are about 1 MiB) of each offload attempt the managed-ledger metadata (under
``ledger_root``) records complete; without any managed-ledger metadata there,
of each complete attempt, and a ledger with two complete attempts is an
error naming it (see :func:`tieredstore.ledger.plan_ledger_slices`).

Options: the store as for ``tieredstore`` (``path``, or ``backend=s3`` with
``bucket``...); the offloader's namespace, as the store's config keys (a
``config`` file's ``[ledger]`` section, or the options): ``offload_prefix``
(default ``offload``) and ``ledger_root`` (``managed-ledgers``); the selection,
applied before anything is read: ``ledger_id`` and ``managed_ledger``
(comma-separated), ``entry_from`` (inclusive) and ``entry_to`` (exclusive).
As for ``tieredstore``, Spark's own filters are applied to the rows and not pushed down (see
:mod:`tieredstore.spark.read.datasource`): select with the options to prune.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from tieredstore import sync
from tieredstore.config import TieredStoreConfig
from tieredstore.ledger import (
    LedgerEntry,
    LedgerSelection,
    LedgerSlice,
    OffloadNamespace,
    offload_namespace,
    plan_ledger_slices,
    read_ledger_slice,
)
from tieredstore.spark.options import int_option, lower_options
from tieredstore.spark.read.selection import ints, names, one_int
from tieredstore.spark.read.source import PlannedReader, Source
from tieredstore.store import ObjectStore, open_object_store

LEDGER_FORMAT = "tieredstore-ledger"
LEDGER_OPTIONS = frozenset({"ledger_id", "managed_ledger", "entry_from", "entry_to",
                            "blocks_per_partition"})

_ARROW = pa.schema([
    pa.field("managed_ledger", pa.string(), True),
    pa.field("ledger_id", pa.int64(), False),
    pa.field("entry_id", pa.int64(), False),
    pa.field("payload", pa.binary(), False),
    pa.field("offload_uuid", pa.string(), False),
])
LEDGER_SCHEMA = from_arrow_schema(_ARROW)  # the same columns as Spark types


def ledger_selection(options: Mapping[str, str]) -> LedgerSelection:
    """From the reader options ``ledger_id``, ``managed_ledger`` (comma-separated),
    ``entry_from`` (inclusive) and ``entry_to`` (exclusive)."""
    ids = options.get("ledger_id", "").strip()
    managed = options.get("managed_ledger", "").strip()
    first = options.get("entry_from", "").strip()
    end = options.get("entry_to", "").strip()
    return LedgerSelection(
        frozenset(ints("ledger_id", ids)) if ids else None,
        frozenset(names(managed)) if managed else None,
        max(0, one_int("entry_from", first)) if first else 0,
        one_int("entry_to", end) if end else None)


def entries_batch(part: LedgerSlice, entries: Sequence[LedgerEntry]) -> Any:
    n = len(entries)
    return pa.RecordBatch.from_arrays([
        pa.array([part.managed_ledger] * n, pa.string()),
        pa.array([part.ledger_id] * n, pa.int64()),
        pa.array([e.entry_id for e in entries], pa.int64()),
        pa.array([e.payload for e in entries], pa.binary()),
        pa.array([part.offload_uuid] * n, pa.string()),
    ], schema=_ARROW)


BLOCKS_PER_PARTITION = 16
"""PIP-17 blocks are about 1 MiB: a partition reads about 16 MiB."""


class LedgerReader(PlannedReader):
    """One slice of an offloaded ledger (:class:`LedgerSlice`) per task."""

    def __init__(self, config: TieredStoreConfig, space: OffloadNamespace,
                 selection: LedgerSelection, blocks_per_partition: int) -> None:
        super().__init__(config)
        self.space = space
        self.selection = selection
        self.blocks_per_partition = blocks_per_partition

    async def plan(self, store: ObjectStore) -> list[LedgerSlice]:
        return await plan_ledger_slices(store, self.space, self.selection,
                                        root=self.config.ledger_root,
                                        blocks_per_slice=self.blocks_per_partition)

    def batches(self, part: LedgerSlice) -> Iterator[Any]:
        async def entries() -> Any:
            async with open_object_store(self.config) as store:
                async for batch in read_ledger_slice(store, part):
                    yield batch

        return (entries_batch(part, batch) for batch in sync.iterate(entries))


class TieredStoreLedgerDataSource(Source):
    """Short name ``tieredstore-ledger``. Options: see
    :mod:`tieredstore.spark.read.ledger_source`."""

    format_name, columns = LEDGER_FORMAT, LEDGER_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        options = lower_options(dict(self.options))
        config = self.store_config(options, skip=LEDGER_OPTIONS)
        return LedgerReader(config, offload_namespace(config),
                            ledger_selection(options),
                            int_option(options, "blocks_per_partition", BLOCKS_PER_PARTITION, lo=1))
