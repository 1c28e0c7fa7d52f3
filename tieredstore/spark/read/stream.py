"""``spark.readStream.format("tieredstore")``: a Structured Streaming source with
Kafka's conventions.

Offsets are per queue ``(broker, topic, queue id)``, as the JSON map
``{"BROKER/TOPIC": {"QUEUE": NEXT_OFFSET}}`` (the next offset to read, as
Kafka's), checkpointed by Spark. Each micro-batch ends where a read-only view
ends now (:func:`~tieredstore.spark.read.plan.queue_bounds`: what is durable in the
bucket, the commit log's durable tail included; the reader keeps each queue's
last walk of that tail and walks only what is new), bounded by the read
limits; its offset ranges are read with the batch reader's planning and scan
(:func:`~tieredstore.spark.read.plan.plan_read` with ``queue_offsets``, ``whole``:
a slice reads every offset of its range or fails naming those it cannot
find, never fewer rows; :class:`~tieredstore.spark.read.reader.TieredStoreReader`),
one input partition per planned slice.

Options, besides the store's and ``broker``/``topic``/``queue_id`` (as the
batch source's, chosen again at each batch, so queues and brokers that
appear later are read from their earliest offset):

- ``startingOffsets``: ``earliest`` (default), ``latest``, or the JSON map
  (a queue it leaves out starts at its earliest);
- ``maxOffsetsPerTrigger``: at most this many messages a batch, shared among
  the queues in proportion to their backlog (each that has one gets at least
  one); ``maxBytesPerTrigger``: at most about this many bytes of records a
  batch (the consume queue's record sizes; at least one message a queue);
  ``Trigger.AvailableNow`` reads what is there when the query starts, in
  batches of those limits, then ends;
- ``failOnDataLoss`` (default ``true``): a batch that would start below a
  queue's first stored offset (retention removed them unread) fails naming
  the queue and the lost range; ``false``: they are skipped, and a WARNING
  counts them.

The batch source's offset and time options (``offset_from``, ``time_from``,
...) and ``queue_offsets`` are refused: a stream's offsets are its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError, TieredStoreError
from tieredstore.spark.options import on_store
from tieredstore.spark.read.plan import plan_read, queue_bounds
from tieredstore.spark.read.reader import TieredStoreReader
from tieredstore.spark.read.selection import Queue, Selection, Span
from tieredstore.spark.read.source import Planned
from tieredstore.store import DurableTail, ObjectStore, QueueView

log = logging.getLogger(__name__)

STREAM_OPTIONS = frozenset({"startingoffsets", "maxoffsetspertrigger", "maxbytespertrigger",
                            "failondataloss"})
BATCH_ONLY = ("offset_from", "offset_to", "time_from", "time_to", "queue_offsets")
UNITS_AT_ONCE = 65536  # consume-queue units read at most per queue to apply a byte limit

Offsets = dict[Queue, int]


class DataLoss(TieredStoreError, LookupError):
    """Offsets a streaming query had not read were removed (by retention)."""


def offsets_json(offsets: Mapping[Queue, int]) -> dict[str, dict[str, int]]:
    """``{(broker, topic, queue): next}`` as the offset Spark checkpoints:
    ``{"BROKER/TOPIC": {"QUEUE": NEXT}}``."""
    out: dict[str, dict[str, int]] = {}
    for (broker, topic, queue_id), offset in sorted(offsets.items()):
        out.setdefault(f"{broker}/{topic}", {})[str(queue_id)] = offset
    return out


def parse_offsets(raw: Mapping[str, Any], key: str = "startingOffsets") -> Offsets:
    """The checkpointed (or given) JSON map back as ``{(broker, topic, queue): next}``."""
    out: Offsets = {}
    try:
        for name, queues in raw.items():
            broker, sep, topic = name.partition("/")
            if not (sep and broker and topic and isinstance(queues, Mapping)):
                raise ValueError(name)
            for queue_id, offset in queues.items():
                if type(offset) is not int or offset < 0:
                    raise ValueError(offset)
                out[(broker, topic, int(queue_id))] = offset
    except (ValueError, TypeError, AttributeError):
        raise ConfigError(key, 'must be earliest, latest or a JSON map {"BROKER/TOPIC": '
                          f'{{"QUEUE": OFFSET}}}} of offsets >= 0, got {json.dumps(raw)[:200]}'
                          ) from None
    return out


def share(budget: int, backlog: Mapping[Queue, int]) -> dict[Queue, int]:
    """``budget`` messages shared among queues in proportion to their backlog, no
    queue given more than its backlog; each with a backlog gets at least one
    while the budget lasts (the longest backlogs first), so every queue moves on.
    Pure."""
    waiting = {q: n for q, n in sorted(backlog.items()) if n > 0}
    total = sum(waiting.values())
    if total <= budget:
        return waiting
    if budget < len(waiting):
        longest = sorted(waiting, key=lambda q: (-waiting[q], q))[:budget]
        return dict.fromkeys(sorted(longest), 1)
    rest, extra = budget - len(waiting), total - len(waiting)
    out = {q: 1 + rest * (n - 1) // extra for q, n in waiting.items()}
    left = budget - sum(out.values())
    for q, n in waiting.items():  # what rounding down left, in queue order
        more = min(left, n - out[q])
        out[q] += more
        left -= more
    return out


class TieredStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans each micro-batch on the driver; reads its slices as the batch reader."""

    def __init__(self, config: TieredStoreConfig, selection: Selection, *, starting: str,
                 max_rows: int, max_bytes: int, fail_on_data_loss: bool,
                 reader: TieredStoreReader) -> None:
        self.config = config
        self.selection = selection
        self.starting = starting
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.fail_on_data_loss = fail_on_data_loss
        self.reader = reader
        self.target: Offsets | None = None  # Trigger.AvailableNow: where to end
        # Each queue's durable tail as last walked: the next batch walks what is new.
        self.tails: dict[Queue, DurableTail] = {}

    def _bounds(self) -> dict[Queue, tuple[int, int]]:
        return on_store(self.config, lambda store: queue_bounds(store, self.config,
                                                                self.selection, self.tails))

    def initialOffset(self) -> dict[str, Any]:
        bounds = self._bounds()
        if self.starting == "latest":
            return offsets_json({q: end for q, (_, end) in bounds.items()})
        if self.starting == "earliest":
            return offsets_json({q: first for q, (first, _) in bounds.items()})
        given = parse_offsets(json.loads(self.starting))
        return offsets_json({**{q: first for q, (first, _) in bounds.items()}, **given})

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_rows:
            return ReadMaxRows(self.max_rows)
        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {q: end for q, (_, end) in self._bounds().items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begun = parse_offsets(start, "offset")
        bounds = self._bounds()
        ends = {q: end for q, (_, end) in bounds.items()}
        if self.target is not None:  # AvailableNow: nothing past what was there
            ends = {q: min(end, self.target[q]) for q, end in ends.items() if q in self.target}
        # From where each queue goes on: its checkpointed offset, else its earliest;
        # what retention removed is the batch's to report (partitions).
        froms = {q: max(begun.get(q, bounds[q][0]), bounds[q][0]) for q in ends}
        if isinstance(limit, ReadAllAvailable):
            rows, size = 0, 0
        else:
            rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_rows
            size = limit.max_bytes if isinstance(limit, ReadMaxBytes) else self.max_bytes
        backlog = {q: max(0, ends[q] - froms[q]) for q in ends}
        if rows:
            backlog = share(rows, backlog)
        if size:
            backlog = on_store(self.config, lambda store: self._within_bytes(
                store, froms, backlog, size))
        out = dict(begun)
        for q, n in backlog.items():
            if n > 0:
                out[q] = froms[q] + n
        return offsets_json(out)

    async def _within_bytes(self, store: ObjectStore, froms: Offsets,
                            backlog: Mapping[Queue, int], budget: int) -> dict[Queue, int]:
        """``backlog`` cut to about ``budget`` bytes of records (their consume-queue
        sizes), shared among the queues in proportion to their backlog, at least
        one message each."""
        out: dict[Queue, int] = {}
        waiting = {q: n for q, n in sorted(backlog.items()) if n > 0}
        total = sum(waiting.values())
        for (broker, topic, queue_id), n in waiting.items():
            queue, bytes_left = (broker, topic, queue_id), budget * n // total
            view = await QueueView.open(store, self.config.replace(broker=broker), topic,
                                        queue_id, tail_after=self.tails.get(queue))
            first = froms[queue]
            units = await view.units(first, first + min(backlog[queue], UNITS_AT_ONCE))
            taken = 0
            for unit in units:
                if taken and unit.size > bytes_left:
                    break
                bytes_left -= unit.size
                taken += 1
            out[queue] = max(1, taken)
        return out

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begun, ending = parse_offsets(start, "offset"), parse_offsets(end, "offset")
        wanted = {q: stop for q, stop in ending.items() if stop > begun.get(q, 0)}
        if not wanted:
            return []
        bounds = self._bounds()
        ranges: dict[Queue, Span] = {}
        lost: list[str] = []
        skipped = 0
        for q, stop in sorted(wanted.items()):
            first = bounds.get(q, (0, 0))[0]
            lo = begun.get(q, first)
            if lo < first:
                lost.append(f"{q[0]}/{q[1]}/{q[2]} offsets [{lo}, {min(first, stop)})")
                skipped += min(first, stop) - lo
                lo = first
            if lo < stop:
                ranges[q] = Span(lo, stop - 1)
        if lost and self.fail_on_data_loss:
            raise DataLoss("retention removed offsets this query had not read: "
                           + "; ".join(lost) + " (failOnDataLoss=false skips them)")
        if lost:
            log.warning("skipped %d message(s) that retention removed before they were "
                        "read (failOnDataLoss=false): %s", skipped, "; ".join(lost))
        if not ranges:
            return []
        selection = Selection(queue_offsets=ranges)
        slices = on_store(self.config, lambda store: plan_read(
            store, self.config, selection,
            messages_per_slice=self.reader.messages_per_partition, whole=True))
        return [Planned(s) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, Planned):
            return iter(())
        return self.reader.batches(partition.slice)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the store keeps no reader state."""


def stream_options(options: Mapping[str, str]) -> dict[str, Any]:
    """The streaming options (keys in lower case) as the reader's arguments; the
    batch source's offset and time options refused."""
    for key in BATCH_ONLY:
        if key in options:
            raise ConfigError(key, "is an option of the batch source; a streaming query "
                              "starts at startingOffsets (earliest, latest or a JSON map "
                              '{"BROKER/TOPIC": {"QUEUE": OFFSET}}) and keeps its offsets '
                              "in its checkpoint")
    starting = options.get("startingoffsets", "earliest").strip()
    if starting.lower() in ("earliest", "latest"):
        starting = starting.lower()
    else:
        try:
            parse_offsets(json.loads(starting))
        except ValueError:
            raise ConfigError("startingOffsets", "must be earliest, latest or a JSON map "
                              '{"BROKER/TOPIC": {"QUEUE": OFFSET}}, got '
                              f"{starting[:200]!r}") from None
    fail = options.get("failondataloss", "true").strip().lower()
    if fail not in ("true", "false"):
        raise ConfigError("failOnDataLoss", f"must be true or false, got {fail!r}")
    return {"starting": starting, "fail_on_data_loss": fail == "true",
            "max_rows": _positive(options, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
            "max_bytes": _positive(options, "maxbytespertrigger", "maxBytesPerTrigger")}


def _positive(options: Mapping[str, str], key: str, name: str) -> int:
    text = options.get(key, "").strip()
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(name, f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise ConfigError(name, f"must be at least 1, got {value}")
    return value
