"""The message store a host embeds: per-queue commit log and consume queue on
tiered segments, metadata in the bucket, recovery after restart."""

from tieredstore.store.context import (
    MessageTooLarge,
    OffsetError,
    OffsetOutOfRange,
    QueueCorrupt,
    StoreError,
)
from tieredstore.store.facade import MessageStore
from tieredstore.store.message_store import AsyncMessageStore
from tieredstore.store.record import Message

__all__ = [
    "AsyncMessageStore",
    "Message",
    "MessageStore",
    "MessageTooLarge",
    "OffsetError",
    "OffsetOutOfRange",
    "QueueCorrupt",
    "StoreError",
]
