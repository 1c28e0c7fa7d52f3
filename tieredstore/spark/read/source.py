"""What both formats (``tieredstore``, ``tieredstore-ledger``) are made of: a
:class:`Source` (the DataSource, its store named by the options or bound on
the driver) and a :class:`PlannedReader` (slices planned on the driver, one
:class:`Planned` input partition each, read one per task).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError
from tieredstore.spark.options import (
    READER_OPTIONS,
    SELECTION_OPTIONS,
    check_known,
    config_from_options,
    on_store,
)
from tieredstore.store import ObjectStore


@dataclass(frozen=True)
class Planned(InputPartition):
    """One input partition: one planned slice (plain values, pickled to executors)."""

    slice: Any


class PlannedReader(DataSourceReader):
    """Plans slices on the driver, on a store of its own (:meth:`plan`), one input
    partition each; reads one slice per task (:meth:`batches`)."""

    def __init__(self, config: TieredStoreConfig) -> None:
        self.config = config

    async def plan(self, store: ObjectStore) -> Sequence[Any]:
        raise NotImplementedError

    def batches(self, part: Any) -> Iterator[Any]:
        """The slice's rows as Arrow record batches."""
        raise NotImplementedError

    def partitions(self) -> list[InputPartition]:
        return [Planned(s) for s in on_store(self.config, self.plan)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, Planned):
            return iter(())  # Spark's placeholder when there is nothing to read
        return self.batches(partition.slice)


class Source(DataSource):
    """A format of short name :attr:`format_name` and schema :attr:`columns`; its
    store named by the options, or :attr:`bound` (see :mod:`tieredstore.spark.read.bound`)."""

    format_name: ClassVar[str]
    columns: ClassVar[StructType]
    # The configuration a format bound on the driver reads (pickled with the class).
    bound: ClassVar[TieredStoreConfig | None] = None

    @classmethod
    def name(cls) -> str:
        return cls.format_name

    def schema(self) -> StructType:
        return self.columns

    def store_config(self, options: Mapping[str, str], *,
                     skip: frozenset[str] = SELECTION_OPTIONS) -> TieredStoreConfig:
        """The store to read: :attr:`bound`, or the one the options (of which
        ``skip`` are the reader's own) name. A bound format takes no store option."""
        if self.bound is None:
            return config_from_options(options, skip=skip)
        check_known(options, skip)
        named = sorted(k for k in options
                       if k == "config" or (k not in skip and k not in READER_OPTIONS))
        if named:
            raise ConfigError(named[0], f"format {self.name()!r} reads the store it was "
                              "bound to (tieredstore.spark.bind): give it no store options")
        return self.bound
