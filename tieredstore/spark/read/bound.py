"""A format bound to a store configuration resolved on the driver.

``spark.read.format("tieredstore")`` resolves its store from the options in the
Python process that plans the read: a process Spark's JVM starts, with the
JVM's environment (fixed when the session started) and the options as Spark
keeps them (shown in its plans, possibly, and its UI). Credentials this
driver holds, from a configuration file, ``TIEREDSTORE_S3_*`` or ``AWS_*``
set later, or the command line, are not there.

:func:`bind` registers, under a name of its own, a subclass of the format
whose class attribute ``bound`` is the resolved configuration. PySpark
pickles the class (by value: cloudpickle, as a class defined in a function)
into the session's data source registry, in the JVM's memory; the planning
process unpickles it and builds its reader from ``bound`` (the reader, with
the configuration, is pickled to the executors, as the jobs' tasks are). No
option, conf, environment variable, file or plan string carries the
configuration, and this works on a cluster as on ``local[*]``: planning runs
on the driver's machine, the tasks get the reader from the driver. S3
credentials that boto3's chain resolves here are bound with it (as
:func:`~tieredstore.spark.options.readable` carries them), a snapshot: bind
again when a session token has expired (docs/spark-shipping.md, "Credentials").

A bound format takes the selection and reader options only (a store option
is an error). Each call registers one more name for the session's life:
bind once per store, not per query.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from tieredstore.config import TieredStoreConfig
from tieredstore.spark.options import config_from_options, readable
from tieredstore.spark.read.datasource import TieredStoreDataSource
from tieredstore.spark.read.source import Source


def bind(spark: Any, store: TieredStoreConfig | Mapping[str, str],
         source: type[Source] = TieredStoreDataSource) -> str:
    """Register ``source`` (``tieredstore`` by default) bound to ``store`` (a
    configuration, or store options resolved here, as the reader would resolve
    them) with ``spark``; the format name to read it by
    (``spark.read.format(name)``): ``<format>-bound-<random hex>``."""
    config = (readable(store) if isinstance(store, TieredStoreConfig)
              else config_from_options(store, skip=frozenset()))
    name = f"{source.format_name}-bound-{uuid.uuid4().hex[:16]}"
    bound = type(f"Bound{source.__name__}", (source,),
                 {"format_name": name, "bound": config, "__module__": __name__})
    spark.dataSource.register(bound)
    return name
