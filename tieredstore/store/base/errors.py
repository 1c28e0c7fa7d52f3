"""The message store's errors; ``topic``/``queue_id`` say which queue."""

from __future__ import annotations

from tieredstore.errors import (
    CommitFailed,
    Corrupt,
    IntegrityError,
    TieredStoreError,
    TransientError,
)
from tieredstore.segment.pool import CommitRetriesExhausted


class StoreError(TieredStoreError):
    """Base of the message store's own errors; ``topic``/``queue_id`` say where."""

    def __init__(self, message: str, *, topic: str = "", queue_id: int | None = None
                 ) -> None:
        where = f"{topic}/{queue_id}: " if topic else ""
        super().__init__(where + message)
        self.topic = topic
        self.queue_id = queue_id


class OffsetError(StoreError, ValueError):
    """An offset the host gave is not the next one (a gap or a rewind)."""


class OffsetOutOfRange(StoreError, ValueError):
    """A read asked for an offset outside ``[min_offset, max_offset]``."""


class MessageTooLarge(StoreError, ValueError):
    """A message is larger than ``max_message_size``."""


class QueueCorrupt(StoreError, Corrupt):
    """Recovery found this queue's data inconsistent; it is kept read-only."""


class NoSuchQueue(OffsetOutOfRange, LookupError):
    """The store holds no queue of that name."""

    def __init__(self, topic: str, queue_id: int) -> None:
        super().__init__("no such queue", topic=topic, queue_id=queue_id)


# Failures that say nothing of a queue's data: the store was unreachable, or a
# read was damaged on the way.
_PASSING = (TransientError, CommitFailed, CommitRetriesExhausted, IntegrityError)


def passing(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from (a scan names the read
    that failed as its cause), is one of :data:`_PASSING`: the same work may
    succeed later. An open that fails so is not a corrupt queue, and a step of
    it that reads must not take such a failure for lost bytes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _PASSING):
            return True
        seen = seen.__cause__
    return False
