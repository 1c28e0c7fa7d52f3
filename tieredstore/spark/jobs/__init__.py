"""Spark jobs over a store: export (batch and continuous), verify, compact, stats.

:mod:`.run` holds the jobs as functions of a SparkSession and the reader
options (its docstring has their command line); :mod:`.export`,
:mod:`.continuous` and :mod:`.table` the Delta Lake export, :mod:`.compact`,
:mod:`.logs`, :mod:`.verify` and :mod:`.stats` the tasks of the others.
"""

from tieredstore.spark.jobs.run import (
    Filters,
    check_options,
    compact,
    compact_logs,
    export,
    export_continuous,
    stats,
    verify,
    verify_reports,
)

__all__ = ["Filters", "check_options", "compact", "compact_logs", "export",
           "export_continuous", "stats", "verify", "verify_reports"]
