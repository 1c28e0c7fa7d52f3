"""Registers the ``tieredstore-ledger`` format with every SparkSession, with no
call (see ``pyspark_tieredstore``)."""

from tieredstore.spark.read.ledger_source import TieredStoreLedgerDataSource as DefaultSource

__all__ = ["DefaultSource"]
