"""The upload buffer pool: one byte budget for the appends of every open segment."""

from tieredstore.segment.pool.buffer import SegmentBuffer
from tieredstore.segment.pool.metrics import PoolMetrics
from tieredstore.segment.pool.options import (
    AppendResult,
    AppendStatus,
    AppendTooLarge,
    CommitRetriesExhausted,
    PoolOptions,
)
from tieredstore.segment.pool.pool import UploadBufferPool

__all__ = [
    "AppendResult",
    "AppendStatus",
    "AppendTooLarge",
    "CommitRetriesExhausted",
    "PoolMetrics",
    "PoolOptions",
    "SegmentBuffer",
    "UploadBufferPool",
]
