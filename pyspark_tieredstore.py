"""Registers the ``tieredstore`` format with every SparkSession, with no call.

PySpark (4.0 and later) looks, when a session first resolves a Python data
source, for top-level modules named ``pyspark_*`` that define
``DefaultSource``, and registers each under its ``name()``. This module is
installed beside the ``tieredstore`` package for that lookup (an editable
install shows it in setuptools' compat mode only, as ``make`` installs it;
otherwise call ``tieredstore.spark.register(spark)``).
"""

from tieredstore.spark.read.datasource import TieredStoreDataSource as DefaultSource

__all__ = ["DefaultSource"]
