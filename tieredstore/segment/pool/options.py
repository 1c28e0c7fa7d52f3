"""Values of the upload buffer pool: its options, append results, its errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import ConfigError, SegmentError, TieredStoreError

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PoolOptions:
    """How much the pool holds and how it commits.

    ``budget_bytes`` bounds every byte appended and not yet committed, across
    all segments (bytes being uploaded count until their commit lands).
    ``chunk_size`` is used for segments that do not say their own (a
    ``ChunkedSegment`` does). Above ``high_water`` x budget of bytes not yet
    due for commit, the pool makes room by committing the largest buffers
    until at most ``low_water`` x budget are left.
    """

    budget_bytes: int = 64 * MiB
    chunk_size: int = 4 * MiB
    group_commit_interval: float = 0.2
    upload_concurrency: int = 16
    retry_max_attempts: int = 6
    retry_base_delay: float = 0.05
    retry_max_delay: float = 2.0
    high_water: float = 0.75
    low_water: float = 0.5
    seed: int | None = None  # of the backoff jitter, for tests

    def __post_init__(self) -> None:
        if self.budget_bytes < 1:
            raise ConfigError("pool_bytes", f"must be >= 1, got {self.budget_bytes}")
        if self.chunk_size < 1:
            raise ConfigError("chunk_size", f"must be >= 1, got {self.chunk_size}")
        if self.group_commit_interval < 0:
            raise ConfigError("group_commit_interval",
                              f"must be >= 0 seconds, got {self.group_commit_interval}")
        if self.upload_concurrency < 1:
            raise ConfigError("upload_concurrency",
                              f"must be >= 1, got {self.upload_concurrency}")
        if self.retry_max_attempts < 1:
            raise ConfigError("retry_max_attempts",
                              f"must be >= 1, got {self.retry_max_attempts}")
        if not 0 <= self.retry_base_delay <= self.retry_max_delay:
            raise ConfigError("retry_base_delay",
                              f"must be in [0, retry_max_delay={self.retry_max_delay}], "
                              f"got {self.retry_base_delay}")
        if not 0 <= self.low_water <= self.high_water <= 1:
            raise ConfigError("high_water", "need 0 <= low_water <= high_water <= 1, got "
                              f"{self.low_water} and {self.high_water}")

    @classmethod
    def from_config(cls, config: TieredStoreConfig) -> PoolOptions:
        """The pool's knobs from the library configuration.

        Refuses a budget smaller than the largest message, which could never
        be admitted.
        """
        if config.max_message_size > config.pool_bytes:
            raise ConfigError(
                "pool_bytes",
                f"must be at least max_message_size={config.max_message_size}, "
                f"got {config.pool_bytes}",
            )
        return cls(
            budget_bytes=config.pool_bytes,
            chunk_size=config.chunk_size,
            group_commit_interval=config.group_commit_interval,
            upload_concurrency=config.upload_concurrency,
            retry_max_attempts=config.retry_max_attempts,
            retry_base_delay=config.retry_base_delay,
            retry_max_delay=config.retry_max_delay,
        )


class AppendStatus(enum.Enum):
    OK = "ok"
    BUFFER_FULL = "buffer_full"


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What ``try_append`` did: appended at ``position``, or nothing (BUFFER_FULL)."""

    status: AppendStatus
    position: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is AppendStatus.OK


class AppendTooLarge(TieredStoreError, ValueError):
    """One append is larger than the pool's whole budget: it can never be admitted."""


class CommitRetriesExhausted(SegmentError):
    """Commits of a segment kept failing; its bytes stay buffered.

    The cause is the last failure. Raised once: to the flushes waiting on the
    segment, or else to its next append or flush. After that its bytes are
    due again one group-commit interval later, and retries start over.
    """

    def __init__(self, message: str, *, segment: str, attempts: int, buffered: int) -> None:
        super().__init__(message, segment=segment)
        self.attempts = attempts
        self.buffered = buffered
