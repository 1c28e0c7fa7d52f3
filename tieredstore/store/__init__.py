"""The message store a host embeds: per-queue commit log and consume queue on
tiered segments, metadata in the bucket, recovery after restart.

Besides the store itself, what the command line and Spark build on: the
read-only views (of a broker, :class:`ReadOnlyMessageStore`, and of every
broker of a cluster, :class:`ReadOnlyCluster`), the queue and segment views, the one scan of a queue
(:class:`QueueScan`, of a :class:`ScanSpec`) and the one verifier (:func:`verify_queue`), a queue's
summary, the record codec, the head properties, garbage collection and the
listing of the queues that have segments; and the lower layers' types these
hand out (the backend, the flat file types, segment states, the broker's log,
a queue's metadata). Nothing outside this package needs its submodules, nor
the command line the packages below it.
"""

from tieredstore.filetype import FileType
from tieredstore.log import LogSnapshot
from tieredstore.metadata import QueueMetadata
from tieredstore.metadata.liveness import Seen, WriterLive
from tieredstore.objectstore import LocalObjectStore, ObjectStore
from tieredstore.segment import SegmentState
from tieredstore.store.api.cluster import ClusterQueue, ReadOnlyCluster
from tieredstore.store.api.facade import MessageStore
from tieredstore.store.api.message_store import AsyncMessageStore
from tieredstore.store.api.read_only import ReadOnlyMessageStore
from tieredstore.store.api.watch import BucketWatch, scrape_bucket, serve_bucket_metrics
from tieredstore.store.base.arguments import MAX_TIMESTAMP, check_append
from tieredstore.store.base.compose import (
    carrying_credentials,
    holds_local_store,
    open_fetcher,
    open_object_store,
    pool_options,
    prepare_bucket,
)
from tieredstore.store.base.errors import (
    MessageTooLarge,
    NoSuchQueue,
    OffsetError,
    OffsetOutOfRange,
    QueueCorrupt,
    StoreError,
)
from tieredstore.store.base.outgoing import Outgoing
from tieredstore.store.base.shown import iso, parse_time
from tieredstore.store.formats.codec import KeyProvider, RecordCodec
from tieredstore.store.formats.keys import log_path, metadata_root
from tieredstore.store.formats.properties import clean_from, merges_owed
from tieredstore.store.formats.record import (
    UNIT_SIZE,
    Message,
    RecordError,
    decode_record,
)
from tieredstore.store.ops.brokers import list_brokers, refuse_live_writer, writer_seen
from tieredstore.store.ops.gc import GcReport, collect_garbage
from tieredstore.store.ops.summary import QueueSummary, summarize
from tieredstore.store.ops.unmerged import (
    Unmerged,
    UnmergedSurvey,
    merge_segment,
    unmerged_segments,
)
from tieredstore.store.ops.verify import QueueCheck, VerifyReport, verify_queue, verify_store
from tieredstore.store.read.around import AroundDamage, Skipped
from tieredstore.store.read.columns import BodyRun, Columns
from tieredstore.store.read.queue_view import (
    LogPiece,
    QueueView,
    planned_log,
    queue_log_pieces,
    reading_fetcher,
    scan_planned,
)
from tieredstore.store.read.scan import Batch, QueueScan, ScanError, ScanSpec
from tieredstore.store.read.selected import unknown_in_cluster, unknown_selected
from tieredstore.store.read.tail import DurableTail
from tieredstore.store.read.view import (
    ListedFile,
    SegmentView,
    list_flat_file,
    list_recorded,
    list_segments,
    listed_queues,
    load_log,
    open_metadata,
    recorded_segments,
    sealing_segments,
    unit_crc,
)
from tieredstore.store.write.recovery import queues_to_rebuild, store_keys

__all__ = [
    "BucketWatch",
    "scrape_bucket",
    "serve_bucket_metrics",
    "Unmerged",
    "UnmergedSurvey",
    "ListedFile",
    "MAX_TIMESTAMP",
    "check_append",
    "list_recorded",
    "merge_segment",
    "unmerged_segments",
    "Batch",
    "BodyRun",
    "Columns",
    "DurableTail",
    "LogPiece",
    "QueueCheck",
    "QueueScan",
    "ScanError",
    "ScanSpec",
    "VerifyReport",
    "planned_log",
    "queue_log_pieces",
    "reading_fetcher",
    "scan_planned",
    "verify_queue",
    "verify_store",
    "FileType",
    "LocalObjectStore",
    "LogSnapshot",
    "ObjectStore",
    "QueueMetadata",
    "SegmentState",
    "listed_queues",
    "unknown_selected",
    "unknown_in_cluster",
    "list_brokers",
    "ClusterQueue",
    "ReadOnlyCluster",
    "store_keys",
    "load_log",
    "queues_to_rebuild",
    "recorded_segments",
    "sealing_segments",
    "unit_crc",
    "Outgoing",
    "QueueSummary",
    "UNIT_SIZE",
    "AsyncMessageStore",
    "GcReport",
    "Message",
    "MessageStore",
    "MessageTooLarge",
    "NoSuchQueue",
    "OffsetError",
    "OffsetOutOfRange",
    "QueueCorrupt",
    "QueueView",
    "ReadOnlyMessageStore",
    "KeyProvider",
    "RecordCodec",
    "RecordError",
    "SegmentView",
    "StoreError",
    "AroundDamage",
    "Skipped",
    "clean_from",
    "collect_garbage",
    "decode_record",
    "list_flat_file",
    "list_segments",
    "merges_owed",
    "log_path",
    "metadata_root",
    "carrying_credentials",
    "holds_local_store",
    "iso",
    "parse_time",
    "open_fetcher",
    "open_metadata",
    "open_object_store",
    "pool_options",
    "prepare_bucket",
    "summarize",
    "Seen",
    "WriterLive",
    "writer_seen",
    "refuse_live_writer",
]
