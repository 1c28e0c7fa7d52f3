"""A queue's scanned columns as Arrow record batches of :data:`ARROW_SCHEMA`
(:data:`SCHEMA` in Spark's types), built with C calls only: the bodies cut
out of the records read by Arrow (one copy), offsets and store times from
their arrays, constant and empty columns made whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.pandas.types import from_arrow_schema

from tieredstore.store import BodyRun, Columns

ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), False),
    pa.field("broker", pa.string(), False),
    pa.field("queue_id", pa.int32(), False),
    pa.field("offset", pa.int64(), False),
    pa.field("store_timestamp", pa.timestamp("us", tz="UTC"), False),
    pa.field("keys", pa.list_(pa.field("element", pa.string(), False)), False),
    pa.field("tags", pa.string(), True),
    pa.field("properties", pa.map_(pa.string(), pa.field("value", pa.string(), False)), False),
    pa.field("body", pa.binary(), False),
])
SCHEMA = from_arrow_schema(ARROW_SCHEMA)  # the same columns as Spark types
_KEYS, _PROPERTIES = ARROW_SCHEMA.field("keys").type, ARROW_SCHEMA.field("properties").type
_MICROS = ARROW_SCHEMA.field("store_timestamp").type

BATCH_ROWS = 8192
BATCH_BYTES = 16 * 1024 * 1024  # of bodies per record batch (at most 2 GiB: 32-bit offsets)
_GATHER = 16  # a run of a 16th of a batch's rows or bytes makes a batch alone
_INT32_MAX = 2**31 - 1  # binary_slice's end: to each body's end (its default fails, 26.0)


def to_record_batches(columns: Columns, broker: str, max_rows: int = BATCH_ROWS
                      ) -> Iterator[Any]:
    """Columns (of a queue of ``broker``) as Arrow record batches of
    :data:`ARROW_SCHEMA`, each of at most ``max_rows`` rows and
    :data:`BATCH_BYTES` of bodies (or one body). Built in C: the bodies cut out
    of the bytes read (one copy, by Arrow), the offsets and store times from
    their arrays, the topic, broker, queue and empty keys, tags and properties
    as constant arrays."""
    offsets, stamps = columns.offsets(), columns.timestamps()
    row = 0
    for pieces in _batches(columns.runs(), max_rows):
        bodies = [_bodies(run, lo, hi) for run, lo, hi in pieces]
        n = sum(map(len, bodies))
        body = bodies[0] if len(bodies) == 1 else pa.concat_arrays(bodies)
        yield _record_batch(columns, broker, body, offsets[row : row + n],
                            stamps[row : row + n], i=row)
        row += n


def _batches(runs: Sequence[BodyRun], max_rows: int) -> Iterator[list[tuple[BodyRun, int, int]]]:
    """The rows of ``runs`` as batches of pieces ``(run, lo, hi)``: a run of
    many rows or bytes alone (cut to the bounds of a batch), small ones
    gathered (their bodies joined: a copy)."""
    group: list[tuple[BodyRun, int, int]] = []
    rows = size = 0
    for run in runs:
        lo, n = 0, len(run)
        # The bytes of the bodies up to the end of each row.
        ends = run.at[1:] - run.at[0] - run.skip * np.arange(1, n + 1)
        while lo < n:
            before = int(ends[lo - 1]) if lo else 0
            hi = min(n, lo + max_rows,
                     max(lo + 1, int(np.searchsorted(ends, before + BATCH_BYTES, "right"))))
            bytes_ = int(ends[hi - 1]) - before
            big = hi - lo >= max_rows // _GATHER or bytes_ >= BATCH_BYTES // _GATHER
            if group and (big or rows + hi - lo > max_rows or size + bytes_ > BATCH_BYTES):
                yield group
                group, rows, size = [], 0, 0
            group.append((run, lo, hi))
            rows, size = rows + hi - lo, size + bytes_
            if big:
                yield group
                group, rows, size = [], 0, 0
            lo = hi
    if group:
        yield group


def _bodies(run: BodyRun, lo: int, hi: int) -> Any:
    """Bodies ``[lo, hi)`` of ``run`` as an Arrow binary array: offsets into the
    bytes read, then each body cut out of its record (Arrow copies them once)."""
    at = run.at[lo : hi + 1]
    base = int(at[0])
    data = pa.py_buffer(run.data)[base : int(at[-1])]
    offsets = pa.py_buffer((at - base).astype(np.int32))
    whole = pa.Array.from_buffers(pa.binary(), hi - lo, [None, offsets, data])
    return pc.binary_slice(whole, run.skip, _INT32_MAX) if run.skip else whole


def _record_batch(columns: Columns, broker: str, body: Any, offsets: Any, stamps: Any, *,
                  i: int) -> Any:
    """Rows ``[i, i + len(body))`` of ``columns``: their bodies, offsets and store times."""
    n = len(body)
    j = i + n
    topic, broker_, queue, no_keys, no_tags, no_properties = _constants(
        columns.topic, broker, columns.queue_id, n)
    keys, tags, properties = columns.keys, columns.tags, columns.properties
    arrays = [
        topic, broker_, queue,
        pa.array(offsets, pa.int64()),
        pa.array(stamps * 1000, _MICROS),  # milliseconds as Spark's microseconds
        no_keys if keys is None else pa.array([list(k) for k in keys[i:j]], _KEYS),
        no_tags if tags is None else pa.array(tags[i:j], pa.string()),
        no_properties if properties is None
        else pa.array([list(p.items()) for p in properties[i:j]], _PROPERTIES),
        body,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


@lru_cache(maxsize=16)
def _constants(topic: str, broker: str, queue_id: int, n: int) -> tuple[Any, ...]:
    """The columns of ``n`` rows of one queue that do not vary (Arrow arrays are
    immutable, so batches of one size share them): its topic, broker and queue,
    no keys, no tags, no properties."""
    none = pa.repeat(pa.scalar(0, pa.int32()), n + 1)  # offsets of n empty lists
    empty = pa.array([], pa.string())
    return (pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(broker, pa.string()), n),
            pa.repeat(pa.scalar(queue_id, pa.int32()), n),
            pa.ListArray.from_arrays(none, empty, type=_KEYS), pa.nulls(n, pa.string()),
            pa.MapArray.from_arrays(none, empty, empty, type=_PROPERTIES))
