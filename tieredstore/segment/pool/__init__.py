"""The upload buffer pool: one byte budget for the appends of every open segment."""

from tieredstore.segment.pool.buffer import SegmentBuffer
from tieredstore.segment.pool.metrics import PoolMetrics
from tieredstore.segment.pool.options import (
    BUFFER_FULL,
    FILE_FULL,
    AppendResult,
    AppendStatus,
    AppendTooLarge,
    CommitRetriesExhausted,
    PoolOptions,
)
from tieredstore.segment.pool.pool import UploadBufferPool

__all__ = [
    "BUFFER_FULL",
    "FILE_FULL",
    "AppendResult",
    "AppendStatus",
    "AppendTooLarge",
    "CommitRetriesExhausted",
    "PoolMetrics",
    "PoolOptions",
    "SegmentBuffer",
    "UploadBufferPool",
]
