"""TieredStoreConfig: every key of the library, its default, range and unit,
and the checks across keys. One frozen dataclass; built by
:func:`~tieredstore.config.load_config` or directly (validated either way)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from tieredstore.config.coerce import coerce
from tieredstore.config.crypto import decode_key
from tieredstore.config.knobs import (
    LayerFields,
    check_value,
    knob,
    repr_value,
)
from tieredstore.config.names import check_names
from tieredstore.config.topics import (
    TOPICS,
    TopicOverrides,
    TopicSettings,
    merged,
    read_topics,
    topic_key,
)
from tieredstore.config.units import human
from tieredstore.errors import ConfigError, check_offload_before_retention
from tieredstore.fetcher.fetcher import FetcherOptions
from tieredstore.log.format import MAX_PIECE_LENGTH
from tieredstore.log.options import LogOptions
from tieredstore.metadata.queue import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from tieredstore.objectstore.backends.s3_settings import SSE_MODES, S3Settings
from tieredstore.objectstore.base import MAX_PART_SIZE
from tieredstore.objectstore.chokepoint import RetryPolicy
from tieredstore.objectstore.factory import BACKENDS, ObjectStoreOptions
from tieredstore.objectstore.governor import Demand, GovernorOptions
from tieredstore.segment.options import SegmentOptions
from tieredstore.segment.pool.options import PoolOptions
from tieredstore.sizes import GiB, KiB, MiB

MAX_LOG_PIECE = MAX_PIECE_LENGTH // KiB * KiB  # the largest chunk_size in write mode log

# Smallest max_message_size: a record's framing alone is 42 bytes.
MIN_MESSAGE_SIZE = 64
DEFAULT_MAX_MESSAGE_SIZE = 4 * MiB
YEAR = 365 * 24 * 3600.0

# The layers' options fields the keys below set (and take their defaults from).
_RETRY = LayerFields(RetryPolicy)
_STORE = LayerFields(ObjectStoreOptions)
_GOVERNOR = LayerFields(GovernorOptions)
_S3 = LayerFields(S3Settings)
_SEGMENT = LayerFields(SegmentOptions)
_FETCHER = LayerFields(FetcherOptions)
_POOL = LayerFields(PoolOptions)
_LOG = LayerFields(LogOptions)
T = TypeVar("T")
WRITE_MODES = ("direct", "log")

# What a store sends to reopen a bucket holding one queue and make its first
# commit, by write mode, counted on the local backend (docs/governor.md; a
# test keeps them at or below what an open sends): a request budget must
# admit it within OPEN_WITHIN seconds, or the host's open waits on its budget.
OPEN_AND_COMMIT = {
    "log": Demand(put=14, get=6, what="an open and one commit"),
    "direct": Demand(put=14, get=2, what="an open and one commit"),
}
OPEN_WITHIN = 60.0


@dataclass(frozen=True, slots=True)
class TieredStoreConfig:
    """Every knob of the library. See :data:`~tieredstore.config.REFERENCE_FILE` for meanings."""

    # where the data lives
    backend: str = knob(_STORE.backend, choices=BACKENDS)
    local_path: str = knob(_STORE.local_path)
    local_fsync: bool = knob(_STORE.local_fsync)
    s3_bucket: str = knob("", also=(_S3.bucket,))
    s3_create_bucket: bool = knob(_STORE.create_bucket)
    s3_accept_ignored_if_none_match: bool = knob(_STORE.accept_ignored_if_none_match)
    s3_endpoint_url: str = knob("", also=(_S3.endpoint_url,))
    s3_region: str = knob("", also=(_S3.region,))
    s3_addressing_style: str = knob(_S3.addressing_style, choices=("auto", "path", "virtual"))
    s3_access_key_id: str = knob("", also=(_S3.access_key_id,))
    s3_secret_access_key: str = knob("", also=(_S3.secret_access_key,))
    s3_session_token: str = knob("", also=(_S3.session_token,))
    s3_max_pool_connections: int = knob(_S3.max_pool_connections, 1, 1024)
    s3_sse: str = knob(_S3.sse, choices=SSE_MODES)
    s3_sse_kms_key_id: str = knob("", also=(_S3.sse_kms_key_id,))
    s3_sse_kms_context: str = knob("", also=(_S3.sse_kms_context,))
    key_prefix: str = knob("tieredstore")
    cluster: str = knob("default-cluster")
    broker: str = knob("broker-0")

    # requests
    request_timeout: float = knob(_RETRY.timeout, 0.001, 3600, unit="s", also=(_S3.read_timeout,))
    connect_timeout: float = knob(_S3.connect_timeout, 0.001, 600, unit="s")
    retry_max_attempts: int = knob(_RETRY.max_attempts, 1, 100)
    retry_base_delay: float = knob(_RETRY.base_delay, 0.0, 60, unit="s")
    retry_max_delay: float = knob(_RETRY.max_delay, 0.0, 600, unit="s")
    # the request governor (tieredstore.objectstore.governor)
    request_put_rate: float = knob(_GOVERNOR.put_rate, 0.0, 1e6)
    request_get_rate: float = knob(_GOVERNOR.get_rate, 0.0, 1e6)
    request_dollars_per_hour: float = knob(_GOVERNOR.dollars_per_hour, 0.0, 1e6)
    request_burst: float = knob(_GOVERNOR.burst, 0.001, 3600, unit="s")
    slowdown_backoff: bool = knob(_GOVERNOR.slowdown_backoff)
    slowdown_cut: float = knob(_GOVERNOR.slowdown_cut, 0.01, 0.99)
    slowdown_recovery: float = knob(_GOVERNOR.slowdown_recovery, 0.001, 86400, unit="s")

    # segments
    chunk_size: int = knob(_SEGMENT.chunk_size, 1 * KiB, 5 * GiB, unit="bytes",
                           also=(_POOL.chunk_size,))
    merge_on_seal: bool = knob(_SEGMENT.merge_on_seal)
    commit_log_max_size: int = knob(1 * GiB, 1 * KiB, 5 * 10_000 * GiB, unit="bytes")
    consume_queue_max_size: int = knob(64 * MiB, 1 * KiB, 5 * 10_000 * GiB, unit="bytes")
    index_max_size: int = knob(16 * MiB, 1 * KiB, 5 * 10_000 * GiB, unit="bytes")
    rolling_interval: float = knob(24 * 3600.0, 0.0, YEAR, unit="s")

    # fetcher
    readahead_chunk_num: int = knob(_FETCHER.readahead_chunk_num, 0, 64)
    readahead_chunk_max: int = knob(_FETCHER.readahead_chunk_max, 0, 256)
    readahead_drop_behind: bool = knob(_FETCHER.drop_behind)
    read_concurrency: int = knob(_FETCHER.read_concurrency, 1, 1024)
    memory_cache_bytes: int = knob(_FETCHER.memory_bytes, 0, 1024 * GiB, unit="bytes")
    disk_cache_bytes: int = knob(0, 0, 100 * 1024 * GiB, unit="bytes")
    disk_cache_path: str = knob("")
    disk_cache_required: bool = knob(False)

    # upload buffer pool
    pool_bytes: int = knob(_POOL.budget_bytes, 1 * KiB, 1024 * GiB, unit="bytes")
    group_commit_interval: float = knob(_POOL.group_commit_interval, 0.0, 3600, unit="s")
    chunk_wait: float = knob(_POOL.chunk_wait, 0.0, 3600, unit="s")
    direct_commit_size: int = knob(_POOL.direct_commit_size, 1, 5 * GiB, unit="bytes")
    upload_concurrency: int = knob(_POOL.upload_concurrency, 1, 1024)
    write_mode: str = knob("log", choices=WRITE_MODES)
    log_object_size: int = knob(_LOG.object_size, 1 * KiB, 5 * GiB, unit="bytes")
    log_compact_age: float = knob(_LOG.compact_age, 0.0, YEAR, unit="s")
    log_consolidate_interval: float = knob(_LOG.consolidate_interval, 0.0, 24 * 3600.0, unit="s")
    log_consolidate_bytes: int = knob(_LOG.consolidate_bytes, 1 * KiB, 5 * GiB, unit="bytes")
    log_compact_bytes: int = knob(_LOG.compact_bytes, 1 * KiB, 5 * GiB, unit="bytes")
    log_hold_bytes: int = knob(_LOG.hold_bytes, 0, 1024 * GiB, unit="bytes")

    # message store
    max_message_size: int = knob(DEFAULT_MAX_MESSAGE_SIZE, MIN_MESSAGE_SIZE, 1 * GiB, unit="bytes")
    file_reserved_time: float = knob(72 * 3600.0, 0.0, 100 * YEAR, unit="s", needs_unit=True)
    retention_interval: float = knob(600.0, 0.0, 30 * 24 * 3600.0, unit="s")
    timestamp_before_max: float = knob(0.0, 0.0, math.inf, unit="s")
    timestamp_after_max: float = knob(3600.0, 0.0, math.inf, unit="s")
    metadata_page_size: int = knob(DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
    gc_interval: float = knob(3600.0, 0.0, 30 * 24 * 3600.0, unit="s")
    gc_safety_age: float = knob(_LOG.delete_age, 0.0, YEAR, unit="s", needs_unit=True)
    heartbeat_interval: float = knob(30.0, 0.0, 3600.0, unit="s")
    claim_concurrency: int = knob(16, 0, 1024)
    # commit-log records at rest (tieredstore.store.formats.codec)
    compression: str = knob("none", choices=("none", "zstd"))
    compression_level: int = knob(3, 1, 22)
    encryption: str = knob("none", choices=("none", "aes-gcm"))
    encryption_key: str = knob("")
    encryption_key_id: str = knob("key-1")
    # ledger offload (the Pulsar adapter)
    ledger_dir: str = knob("")
    ledger_root: str = knob("managed-ledgers")
    offload_prefix: str = knob("offload")
    offload_block_size: int = knob(64 * MiB, 5 * MiB, 2 * GiB, unit="bytes")
    ledger_max_entries: int = knob(50_000, 1, 2**31 - 1)
    ledger_max_bytes: int = knob(2 * GiB, 1, 1024 * GiB, unit="bytes")
    ledger_deletion_lag: float = knob(4 * 3600.0, 0.0, YEAR, unit="s", needs_unit=True)
    # None: no trigger (offload_*) or no limit (ledger_retention_*); "off" in text
    offload_threshold_bytes: int | None = knob(None, 0, 1024**5, unit="bytes")
    offload_threshold_time: float | None = knob(None, 0.0, 100 * YEAR, unit="s")
    ledger_retention_bytes: int | None = knob(None, 0, 1024**5, unit="bytes")
    ledger_retention_time: float | None = knob(None, 0.0, 100 * YEAR, unit="s",
                                               needs_unit=True)
    ledger_sweep_interval: float = knob(600.0, 0.0, 30 * 24 * 3600.0, unit="s")
    ledger_read_priority: str = knob("tiered-storage-first",
                                     choices=("tiered-storage-first", "bookkeeper-first"))
    # metrics
    metrics_port: int = knob(0, 0, 65535)
    metrics_host: str = knob("127.0.0.1")
    price_per_1000_put: float = knob(_GOVERNOR.price_per_1000_put, 0.0, 1000.0)
    price_per_1000_get: float = knob(_GOVERNOR.price_per_1000_get, 0.0, 1000.0)
    # per-topic overrides of file_reserved_time, commit_log_max_size and chunk_size
    # ([topics."NAME"] tables, tieredstore.config.topics); code may give a mapping
    topics: tuple[TopicOverrides, ...] = field(default=(), metadata={"feeds": ()})

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name != TOPICS:
                check_value(f, getattr(self, f.name))
        if self.retry_base_delay > self.retry_max_delay:
            raise ConfigError(
                "retry_base_delay",
                f"must not exceed retry_max_delay = {human(self.retry_max_delay, 's')}, "
                f"got {human(self.retry_base_delay, 's')}",
            )
        if self.readahead_chunk_num > self.readahead_chunk_max:
            raise ConfigError(
                "readahead_chunk_num",
                f"must not exceed readahead_chunk_max={self.readahead_chunk_max}, "
                f"got {self.readahead_chunk_num}",
            )
        if self.chunk_size % KiB:
            # Consume-queue units are 32 bytes; chunk boundaries must not cut one,
            # or a crash between two chunks of a commit would leave half a unit.
            raise ConfigError("chunk_size", "must be a multiple of 1 KiB, got "
                                            f"{human(self.chunk_size, 'bytes')}")
        if self.write_mode == "log" and self.chunk_size > MAX_LOG_PIECE:
            # A group commit's piece of a segment is below a chunk, and its length
            # is a u32 in the log object's index (docs/log-objects.md, Log objects).
            raise ConfigError("chunk_size", f"{human(self.chunk_size, 'bytes')} is too large "
                              "for write_mode = 'log': a log piece's length is 32 bits, so "
                              f"chunk_size must not exceed {human(MAX_LOG_PIECE, 'bytes')}")
        joined = self.chunk_size + min(self.direct_commit_size, self.chunk_size) - 1
        if self.write_mode == "log" and joined > MAX_PART_SIZE:
            # A full chunk takes up to direct_commit_size - 1 bytes behind it (one
            # object, not a chunk and a log piece: SegmentCommitter._next_length),
            # and one PUT holds at most S3's 5 GiB.
            raise ConfigError("chunk_size", f"{human(self.chunk_size, 'bytes')} is too large: a "
                              f"chunk with the remainder it joins (direct_commit_size = "
                              f"{human(self.direct_commit_size, 'bytes')}) could exceed one "
                              f"PUT's {human(MAX_PART_SIZE, 'bytes')}; keep chunk_size + "
                              f"min(direct_commit_size, chunk_size) at or under it")
        if self.max_message_size > self.commit_log_max_size:
            # A record never spans two commit-log segments.
            raise ConfigError(
                "max_message_size",
                f"{human(self.max_message_size, 'bytes')} cannot fit a commit-log segment "
                f"(commit_log_max_size = {human(self.commit_log_max_size, 'bytes')}); "
                "it must not exceed commit_log_max_size")
        if self.encryption_key:
            decode_key(self.encryption_key)
        if not self.encryption_key_id or len(self.encryption_key_id.encode()) > MAX_KEY_ID:
            raise ConfigError("encryption_key_id", f"must be 1 to {MAX_KEY_ID} bytes of "
                                                   f"UTF-8, got {self.encryption_key_id!r}")
        self.options(GovernorOptions).check_serves(OPEN_AND_COMMIT[self.write_mode],
                                                   within=OPEN_WITHIN)
        if self.backend == "s3" and not self.s3_bucket:
            raise ConfigError("s3_bucket", "is required when backend = 's3'")
        for key, limit in (("offload_threshold_bytes", "ledger_retention_bytes"),
                           ("offload_threshold_time", "ledger_retention_time")):
            check_offload_before_retention(key, getattr(self, key), limit, getattr(self, limit),
                                           partial(human, unit=FIELDS[key].metadata["unit"]))
        check_names(self)
        self._check_topics()

    def _check_topics(self) -> None:
        """``topics`` as checked overrides (a mapping from code is read as the file's
        tables are), and each topic's resolved keys through every check above."""
        topics = self.topics
        if not (isinstance(topics, tuple) and all(isinstance(t, TopicOverrides) for t in topics)):
            topics = merged(read_topics(topics, FIELDS, "given in code", written=False))
            object.__setattr__(self, TOPICS, topics)
        for overrides in topics:
            values = dict(read_topics({overrides.topic: dict(overrides.values)}, FIELDS,
                                      "given in code", written=False)[overrides.topic])
            try:
                dataclasses.replace(self, topics=(), **values)
            except ConfigError as exc:
                if exc.key in values:
                    raise ConfigError(topic_key(overrides.topic, exc.key), exc.detail) from None
                raise ConfigError(topic_key(overrides.topic), f"with this topic's overrides, "
                                                              f"{exc.key} {exc.detail}") from None

    def for_topic(self, topic: str) -> TopicSettings:
        """The keys a topic may override, as they apply to ``topic``: its table's
        values, else the top-level keys."""
        values: Mapping[str, Any] = next((dict(t.values) for t in self.topics
                                          if t.topic == topic), {})
        return TopicSettings(
            topic=topic,
            file_reserved_time=values.get("file_reserved_time", self.file_reserved_time),
            commit_log_max_size=values.get("commit_log_max_size", self.commit_log_max_size),
            chunk_size=values.get("chunk_size", self.chunk_size),
            overridden=frozenset(values))

    def options(self, kind: type[T], **given: Any) -> T:
        """``kind`` (a layer's options) from the keys that set its fields (see
        :func:`~tieredstore.config.knobs.knob`) and ``given``. An empty text key
        is unset: a field whose default is None gets None."""
        values = dict(given)
        for f in dataclasses.fields(self):
            for feeds in f.metadata["feeds"]:
                if feeds.kind is kind:
                    value = getattr(self, f.name)
                    values[feeds.name] = None if value == "" and feeds.default is None else value
        return kind(**values)

    def replace(self, **changes: Any) -> TieredStoreConfig:
        """A copy with some keys changed (validated like any other)."""
        return dataclasses.replace(self, **{k: v if k == TOPICS else coerce(FIELDS, k, v)
                                          for k, v in changes.items()})

    def __repr__(self) -> str:
        """Every key; the S3 secret and session token redacted (``<redacted>`` when set)."""
        shown = ", ".join(f"{f.name}={repr_value(f.name, getattr(self, f.name))}"
                          for f in dataclasses.fields(self))
        return f"TieredStoreConfig({shown})"

    __str__ = __repr__


MAX_KEY_ID = 255

# The keys (the file's top-level keys and TIEREDSTORE_* variables); ``topics`` is
# the tables of per-topic overrides, not a key.
FIELDS = {f.name: f for f in dataclasses.fields(TieredStoreConfig) if f.name != TOPICS}
