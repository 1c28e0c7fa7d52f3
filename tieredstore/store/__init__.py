"""The message store a host embeds: per-queue commit log and consume queue on
tiered segments, metadata in the bucket, recovery after restart."""

from tieredstore.store.compose import open_fetcher, open_object_store, pool_options
from tieredstore.store.errors import (
    MessageTooLarge,
    NoSuchQueue,
    OffsetError,
    OffsetOutOfRange,
    QueueCorrupt,
    StoreError,
)
from tieredstore.store.facade import MessageStore
from tieredstore.store.message_store import AsyncMessageStore
from tieredstore.store.read_only import ReadOnlyMessageStore
from tieredstore.store.record import Message

__all__ = [
    "AsyncMessageStore",
    "Message",
    "MessageStore",
    "MessageTooLarge",
    "NoSuchQueue",
    "OffsetError",
    "OffsetOutOfRange",
    "QueueCorrupt",
    "ReadOnlyMessageStore",
    "StoreError",
    "open_fetcher",
    "open_object_store",
    "pool_options",
]
