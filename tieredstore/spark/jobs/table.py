"""The Delta Lake table an export appends to, through delta-rs (``deltalake``).

The format's commit is the protocol: a run's rows are visible once its entry
``_delta_log/<version>.json`` exists, and only then. delta-rs creates that
entry with a conditional write (a local file's atomic create, S3's
``If-None-Match: *``), so of two writers meaning to commit the same version
one wins and the other retries against the new version or fails.

Each queue's exported end offset lives in the table's own log as a Delta
application transaction (``txn``): app id ``tieredstore:<queue>`` (the queue as
JSON ``[broker, topic, queue id]``), version the offset the queue is exported
up to (exclusive). A run commits its files and its queues' new end offsets in
one commit, so the offsets move exactly when the rows become visible. The
table's name ``tieredstore-export`` and description (the store whose queues it
holds: bucket, key prefix and cluster) tell what it is.

Data files: ``topic=<name>/date=<YYYY-MM-DD>/part-<run>-<task>-<n>.parquet``,
``<name>`` the topic with characters other than letters, digits, ``._-``
replaced and a hash of the name added (the partition's value is in the log, not
in the path). Files of a run killed before its commit are in no commit:
readers never see them, ``vacuum`` deletes them.

A task writes per partition files of about a target size at most (128 MiB by
default); :func:`optimize` compacts small ones and :func:`vacuum` deletes what
no recent version needs, with delta-rs (``tieredstore table optimize|vacuum``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from tieredstore.config import MiB, TieredStoreConfig
from tieredstore.errors import ConfigError, TieredStoreError

PARTITION_COLUMNS = ("topic", "date")
TABLE_NAME = "tieredstore-export"
APP_PREFIX = "tieredstore:"

# The rows of a data file (partition columns are in the log, not in the file).
FILE_SCHEMA = pa.schema([
    ("broker", pa.string()),
    ("queue_id", pa.int32()),
    ("offset", pa.int64()),
    ("store_timestamp", pa.timestamp("us", tz="UTC")),
    ("keys", pa.list_(pa.string())),
    ("tags", pa.string()),
    ("properties", pa.map_(pa.string(), pa.string())),
    ("body", pa.binary()),
])
TABLE_SCHEMA = pa.schema([*FILE_SCHEMA, ("topic", pa.string()), ("date", pa.date32())])
TARGET_FILE_SIZE = 128 * MiB  # a data file's size, about, at most (export and optimize)
ROW_GROUP_BYTES = 64 * MiB
# The columns whose min and max a Parquet file keeps (not the bodies: large values).
PARQUET_STATISTICS = ("broker", "queue_id", "offset", "store_timestamp", "tags")
# The columns whose min and max a file's add action carries (for data skipping).
STATS_COLUMNS = ("queue_id", "offset")

# Called with the name of each step as it completes: "opened", "bounded" (the
# queues' end offsets taken), "written" (the data files, not committed),
# "committed" (progress, and the points tests crash at).
StepHook = Callable[[str], None]


class TableError(TieredStoreError):
    """An export table cannot be worked on; ``table`` names it."""

    def __init__(self, table: str, message: str) -> None:
        super().__init__(f"export table {table}: {message}")
        self.table = table


@dataclass(frozen=True, slots=True)
class Location:
    """Where a table lives: its URI for delta-rs, the storage options delta-rs
    takes, and the filesystem (with the path in it) executors write files to."""

    uri: str
    storage_options: Mapping[str, str]
    s3: Mapping[str, str]  # pyarrow S3FileSystem arguments; empty: local

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        if not self.s3:
            return pafs.LocalFileSystem(), self.uri
        parsed = urlparse(self.uri)
        return pafs.S3FileSystem(**self.s3), f"{parsed.netloc}{parsed.path}".rstrip("/")


TABLE_KEYS = ("s3_endpoint_url", "s3_region", "s3_addressing_style", "s3_access_key_id",
              "s3_secret_access_key", "s3_session_token")
"""The settings of an S3 table that lives elsewhere than the store (``--output-*``)."""


def table_access(config: TieredStoreConfig, table: Mapping[str, str] | None
                 ) -> TieredStoreConfig:
    """The S3 settings a table is written and read with: the store's ``config``,
    with ``table``'s (keys of :data:`TABLE_KEYS`) in place of its own where
    the table lives elsewhere. Credentials go as a whole: the table's when it
    has the key ``s3_access_key_id`` (empty: the default chain's, ``AWS_*``
    variables or a profile), else the store's."""
    if not table:
        return config
    for key in sorted(table):
        if key not in TABLE_KEYS:
            raise ConfigError(key, "not an S3 setting of a table; a table elsewhere than "
                              f"the store takes {', '.join(TABLE_KEYS)}")
    changes = dict(table)
    if "s3_access_key_id" in changes:  # empty: the default chain's (AWS_*, a profile...)
        if changes["s3_access_key_id"] and not changes.get("s3_secret_access_key"):
            raise ConfigError("s3_secret_access_key", "the table's access key id is given "
                              "without its secret access key")
        changes.setdefault("s3_secret_access_key", "")
        changes.setdefault("s3_session_token", "")
    elif changes.get("s3_secret_access_key") or changes.get("s3_session_token"):
        raise ConfigError("s3_access_key_id", "the table's secret access key (or session "
                          "token) is given without its access key id")
    return config.replace(**changes)


def table_location(output: str, config: TieredStoreConfig) -> Location:
    """The table ``output`` names: a local path, a ``file://`` URI or
    ``s3://bucket/path`` (credentials, endpoint and region from ``config``'s
    ``s3_*`` settings: the store's, or :func:`table_access`'s)."""
    parsed = urlparse(output)
    if not output:
        raise ConfigError("output", "must name a table")
    if parsed.scheme in ("s3", "s3a"):
        if not parsed.netloc or not parsed.path.strip("/"):
            raise ConfigError("output", f"{output!r}: an S3 table is s3://bucket/path")
        return _s3_location(f"s3://{parsed.netloc}/{parsed.path.strip('/')}", config)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ConfigError("output", f"{output!r}: a file:// URI with a host is not a "
                              "local path")
        path = Path(unquote(parsed.path)).absolute()
    elif parsed.scheme and len(parsed.scheme) > 1:  # not a Windows drive letter
        raise ConfigError("output", f"{output!r}: the export table must be a local path, a "
                          f"file:// URI or s3://bucket/path, not {parsed.scheme}://")
    else:
        path = Path(output).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise ConfigError("output", f"{path} is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    return Location(str(path), {}, {})


def _s3_location(uri: str, config: TieredStoreConfig) -> Location:
    opts: dict[str, str] = {}
    s3: dict[str, str] = {}
    if config.s3_endpoint_url:
        opts["AWS_ENDPOINT_URL"] = config.s3_endpoint_url
        s3["endpoint_override"] = config.s3_endpoint_url
        if config.s3_endpoint_url.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
            s3["scheme"] = "http"
    if config.s3_region:
        opts["AWS_REGION"] = s3["region"] = config.s3_region
    if config.s3_access_key_id:
        opts["AWS_ACCESS_KEY_ID"] = s3["access_key"] = config.s3_access_key_id
        opts["AWS_SECRET_ACCESS_KEY"] = s3["secret_key"] = config.s3_secret_access_key
        if config.s3_session_token:
            opts["AWS_SESSION_TOKEN"] = s3["session_token"] = config.s3_session_token
    if config.s3_addressing_style == "virtual":
        opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "true"
    s3.setdefault("region", "us-east-1")
    return Location(uri, opts, s3)


def app_id(broker: str, topic: str, queue_id: int) -> str:
    """The Delta application transaction id carrying a queue's exported end offset."""
    return APP_PREFIX + json.dumps([broker, topic, queue_id], ensure_ascii=False)


def open_table(where: Location) -> Any:
    """The Delta table at ``where``, or None before the first commit."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(where.uri, storage_options=dict(where.storage_options)):
        return None
    return DeltaTable(where.uri, storage_options=dict(where.storage_options))


def table_source(table: Any) -> str | None:
    """The store whose queues the table holds (None: not an export table)."""
    meta = table.metadata()
    return str(meta.description) if meta.name == TABLE_NAME else None


def exported_end(table: Any, broker: str, topic: str, queue_id: int) -> int | None:
    """The offset ``table`` holds a queue's messages up to (exclusive), or None."""
    return transaction(table, app_id(broker, topic, queue_id))


def transaction(table: Any, app: str) -> int | None:
    """The version of application transaction ``app`` in ``table`` (None: none)."""
    if table is None:
        return None
    version = table.transaction_version(app)
    return int(version) if version is not None else None


def partition_dir(topic: str, day: str) -> str:
    """A partition's directory: the topic's name where it is plain, else its plain
    characters and a hash of the name."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", topic)[:80]
    if plain != topic:
        plain = f"{plain}-{hashlib.sha256(topic.encode()).hexdigest()[:12]}"
    return f"topic={plain}/date={day}"


@dataclass(frozen=True, slots=True)
class DataFile:
    """A data file written, not committed: relative path, size, partition, rows,
    Delta stats JSON, and its queues as JSON ``[[broker, topic, queue id, rows,
    min offset, max offset], ...]``."""

    path: str
    size: int
    topic: str
    date: str
    rows: int
    stats: str
    queues: str


def write_files(where: Location, run: str, task: int, batches: Iterator[pa.RecordBatch],
                target_size: int = TARGET_FILE_SIZE) -> list[DataFile]:
    """Write one task's rows (the table's columns) as Parquet data files into the
    table's location (run in an executor): per partition, files of about
    ``target_size`` bytes at most (a file closes before a row group that would
    take it past that; a file holds at least one row group)."""
    data = pa.Table.from_batches(list(batches))
    if data.num_rows == 0:
        return []
    fs, root = where.filesystem()
    data = data.set_column(data.schema.get_field_index("store_timestamp"), "store_timestamp",
                           data["store_timestamp"].cast(pa.int64())
                           .cast(pa.timestamp("us", tz="UTC")))
    parts = data.select(["topic", "date"]).group_by(["topic", "date"]).aggregate([])
    out: list[DataFile] = []
    for topic, day in zip(parts["topic"].to_pylist(), parts["date"].to_pylist(), strict=True):
        mask = pc.and_(pc.equal(data["topic"], topic), pc.equal(data["date"], day))
        rows = data.filter(mask).select(FILE_SCHEMA.names).cast(FILE_SCHEMA)
        directory = partition_dir(topic, day.isoformat())
        fs.create_dir(f"{root}/{directory}", recursive=True)
        for rel, size, piece in _write_parquet(
                fs, root, functools.partial(_file_name, f"{directory}/part-{run}-{task:05d}",
                                            len(out)), rows, target_size):
            out.append(DataFile(rel, size, topic, day.isoformat(), piece.num_rows,
                                _stats(piece), _queues(topic, piece)))
    return out


def _file_name(stem: str, first: int, n: int) -> str:
    return f"{stem}-{first + n:04d}.parquet"


def _write_parquet(fs: pafs.FileSystem, root: str, name: Callable[[int], str], rows: pa.Table,
                   target_size: int) -> Iterator[tuple[str, int, pa.Table]]:
    """``rows`` as Parquet files (zstd) named ``name(0)``, ``name(1)`` ...: each
    closes before the next row group (at most ``ROW_GROUP_BYTES`` in memory) would
    take it past ``target_size`` bytes, at the rate of compressed bytes per row
    so far; each holds at least one row group. Each file's name, size and rows."""
    per_row = max(1, rows.nbytes // max(1, rows.num_rows))
    group = max(1, min(target_size, ROW_GROUP_BYTES) // per_row)
    start, n = 0, 0
    while start < rows.num_rows:
        rel = name(n)
        end = start
        with fs.open_output_stream(f"{root}/{rel}") as sink, \
                pq.ParquetWriter(sink, FILE_SCHEMA, compression="zstd",
                                 write_statistics=list(PARQUET_STATISTICS)) as writer:
            while end < rows.num_rows:
                piece = rows.slice(end, group)
                writer.write_table(piece, row_group_size=group)
                end += piece.num_rows
                written = sink.tell()
                if written + written * group // (end - start) > target_size:
                    break
        size = int(fs.get_file_info(f"{root}/{rel}").size or 0)
        yield rel, size, rows.slice(start, end - start)
        start, n = end, n + 1


def _queues(topic: str, rows: pa.Table) -> str:
    per = rows.group_by(["broker", "queue_id"]).aggregate(
        [("offset", "count"), ("offset", "min"), ("offset", "max")])
    return json.dumps([[b, topic, q, n, lo, hi] for b, q, n, lo, hi in zip(
        *(per[c].to_pylist() for c in ("broker", "queue_id", "offset_count", "offset_min",
                                       "offset_max")), strict=True)], ensure_ascii=False)


def _stats(rows: pa.Table) -> str:
    mins, maxs = {}, {}
    for name in STATS_COLUMNS:
        mm = pc.min_max(rows[name])
        mins[name], maxs[name] = mm["min"].as_py(), mm["max"].as_py()
    return json.dumps({"numRecords": rows.num_rows, "minValues": mins, "maxValues": maxs,
                       "nullCount": {name: 0 for name in STATS_COLUMNS}})


def commit(where: Location, table: Any, source: str, files: Sequence[DataFile], *,
           ends: Mapping[tuple[str, str, int], int], info: Mapping[str, Any],
           transactions: Mapping[str, int] | None = None) -> int:
    """Commit ``files`` and each queue's new end offset (``ends``), and the other
    application ``transactions`` (app id: version), as one Delta commit, based on
    ``table`` (the version the ends were read at; None: create the table). The
    version committed."""
    from deltalake import CommitProperties, DeltaTable, Schema, Transaction
    from deltalake.transaction import AddAction, create_table_with_add_actions

    now = int(time.time() * 1000)
    adds = [AddAction(f.path, f.size, {"topic": f.topic, "date": f.date}, now, True, f.stats)
            for f in files]
    props = CommitProperties(
        custom_metadata={"tieredstore": json.dumps(dict(info), ensure_ascii=False)},
        app_transactions=[Transaction(app_id(*q), end, now) for q, end in sorted(ends.items())]
        + [Transaction(app, v, now) for app, v in sorted((transactions or {}).items())],
        max_commit_retries=0)
    if table is None:
        create_table_with_add_actions(
            where.uri, Schema.from_arrow(TABLE_SCHEMA), adds, mode="error",
            partition_by=list(PARTITION_COLUMNS),
            name=TABLE_NAME, description=source, storage_options=dict(where.storage_options),
            commit_properties=props)
    else:
        table.create_write_transaction(adds, "append", TABLE_SCHEMA,
                                       partition_by=list(PARTITION_COLUMNS),
                                       commit_properties=props)
    return int(DeltaTable(where.uri, storage_options=dict(where.storage_options)).version())


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.urandom(6).hex()}"


@dataclass(frozen=True, slots=True)
class Optimized:
    """What an optimize did: the table, the version it committed (or the newest,
    if there was nothing to compact), and delta-rs's metrics (``numFilesAdded``,
    ``numFilesRemoved`` ...)."""

    table: str
    version: int
    metrics: Mapping[str, Any]


def optimize_table(output: str, config: TieredStoreConfig,
                   target_size: int = TARGET_FILE_SIZE, *,
                   table: Mapping[str, str] | None = None) -> Optimized:
    """:func:`optimize` the export table ``output`` (as export's: S3 settings from
    ``config``, or ``table``'s: :func:`table_access`)."""
    where = table_location(output, table_access(config, table))
    metrics = optimize(where, target_size)
    return Optimized(where.uri, int(_existing(where).version()), metrics)


def vacuum_table(output: str, config: TieredStoreConfig, retention_hours: float, *,
                 dry_run: bool, table: Mapping[str, str] | None = None
                 ) -> tuple[str, list[str]]:
    """:func:`vacuum` the export table ``output`` (S3 settings as
    :func:`optimize_table`'s): its URI and the files."""
    where = table_location(output, table_access(config, table))
    return where.uri, vacuum(where, retention_hours, dry_run=dry_run)


def optimize(where: Location, target_size: int = TARGET_FILE_SIZE) -> dict[str, Any]:
    """Compact the table's small files into files of about ``target_size`` bytes
    (delta-rs ``optimize.compact``: one commit that removes the small files and
    adds the new ones; the rows, the queues' end offsets and what readers see
    stay the same). delta-rs's metrics: ``numFilesAdded``, ``numFilesRemoved``
    ..."""
    table = _existing(where)
    return dict(table.optimize.compact(target_size=target_size))


def vacuum(where: Location, retention_hours: float, *, dry_run: bool) -> list[str]:
    """Delete the table's files that no version newer than ``retention_hours`` ago
    needs: files an optimize or a delete removed, and files of runs killed
    before their commit (delta-rs ``vacuum``, full mode; ``_`` and ``.``
    directories such as a continuous export's checkpoint are left alone). Files
    younger than that are kept, so a run under way keeps its files: the
    retention must be longer than any run. The files deleted (or, ``dry_run``,
    that would be)."""
    table = _existing(where)
    hours = int(retention_hours)
    if hours != retention_hours or hours < 0:
        raise ConfigError("retention_hours", f"must be a whole number of hours >= 0, got "
                          f"{retention_hours}")
    return list(table.vacuum(retention_hours=hours, dry_run=dry_run,
                             enforce_retention_duration=False, full=True))


def _existing(where: Location) -> Any:
    table = open_table(where)
    if table is None:
        raise TableError(where.uri, "no Delta table there")
    if table_source(table) is None:
        raise TableError(where.uri, "it is not a table tieredstore spark export made")
    return table
