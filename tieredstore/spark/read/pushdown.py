"""Why ``df.where(...)`` is not pushed into the read, and the warning given instead.

How PySpark 4.1 to 4.3 plans a Python DataSource read (read from PySpark
4.3.0's Python workers and its JVM classes, and observed): with
``spark.sql.python.filterPushdown.enabled`` on, ``PythonScanBuilder.pushFilters``
runs a planning worker (``pyspark/sql/worker/data_source_pushdown_filters.py``)
that builds a fresh reader, calls its ``pushFilters`` with the scan's filters,
then its ``partitions()``, and pickles the reader as the read function. The JVM
stores that read plan (partitions and read function) with ``setReadInfo`` on
the ``PythonDataSourceV2`` provider, one object per ``load()``, which every
scan of that DataFrame shares; each scan's ``PythonBatch`` later takes its
partitions from ``getOrCreateReadInfo`` on the same provider. So:

- a scan whose filters do not reach Python (no filter, or none Spark can
  translate) runs no Python at all and reads the plan that the last pushed
  scan left: ``df.count()`` after ``df.where(k == 1).count()`` counts the
  ``k == 1`` partitions only;
- two scans of one query (a union or a join of the DataFrame with itself) both
  read the plan of whichever scan pushed last:
  ``df.where(k == 1).union(df.where(k == 2)).count()`` counts one of the two.

A reader cannot plan from "this query's filters": the plan a scan reads is
not the one its filters made, and nothing of the scan reaches a task but that
shared plan. After a filtered query, an unfiltered one runs none of the
reader's planning code at all, so whatever the reader keeps or does not keep,
partitions that depend on pushed filters give that query too few rows, even
when every filter is returned to Spark (so Spark filters every row again).
``tests/spark/test_reuse.py`` reproduces both cases with a ten-line source
that prunes one partition per ``k``; that test fails once a PySpark release
plans each scan on its own (4.3.0 is the newest here; apache/spark pull
request 57752, for 5.0, reworks this planning worker for limit pushdown, not
verified to fix it), the signal to prune from filters. Until then the plan
depends on the reader options alone, the same for every query over the
DataFrame, and Spark filters the rows.

What the reader does with the filters instead: PySpark's planner passes them
only to a reader that overrides ``pushFilters``, and refuses such a reader
(``DATA_SOURCE_PUSHDOWN_DISABLED``) when the setting is off, a setting the
reader cannot see. Only that planning worker calls ``pushFilters``, and it
runs only with the setting on, so :func:`in_pushdown_planning` (its module on
the stack) picks the reader that overrides it: it returns every filter to
Spark, keeps nothing of them, and logs :func:`unpushed_warning` when filters on
``topic``, ``queue_id``, ``offset`` or ``store_timestamp`` could have pruned,
naming the reader options that select the same. Best effort: if PySpark moved
that worker, no warning is given and the read is the same.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from pyspark.sql.datasource import Filter

from tieredstore.spark.read.filters import filter_columns, selection_from_filters, selection_options
from tieredstore.spark.read.selection import Selection

PUSHDOWN_WORKER = "data_source_pushdown_filters"  # pyspark/sql/worker/<this>.py


def in_pushdown_planning() -> bool:
    """Whether PySpark's filter-pushdown planning worker is on the call stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if Path(frame.f_code.co_filename).stem == PUSHDOWN_WORKER:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def unpushed_warning(selection: Selection, filters: Iterable[Filter]) -> str | None:
    """The warning for a read of ``selection`` (the reader options) whose query has
    ``filters``, or None when they select no fewer segments than the options."""
    filters = list(filters)
    narrowed = selection.intersect(selection_from_filters(filters))
    if narrowed == selection:
        return None
    options = ", ".join(f"{k}={v!r}" for k, v in selection_options(narrowed).items())
    return (f"tieredstore: Spark filters on {', '.join(filter_columns(filters))} are applied "
            "to the rows read, not pushed into the read (PySpark 4.1 to 4.3 hand one scan's "
            "pushed read plan to the other scans of the same DataFrame; see "
            "tieredstore.spark.read.pushdown): the read covers every segment the reader options "
            f"select. The reader options {options} select these rows' segments from metadata "
            "before any data is read.")
