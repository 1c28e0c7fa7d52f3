"""The versions of one queue's head in the object store (see
:mod:`tieredstore.metadata.versions` for the compare-and-swap)."""

from __future__ import annotations

from tieredstore.metadata import metadata_pb2 as pb
from tieredstore.metadata.errors import CorruptMetadata, MetadataError, MetadataFenced
from tieredstore.metadata.format import decode_head
from tieredstore.metadata.keys import QueuePath
from tieredstore.metadata.versions import KEEP_VERSIONS, VersionedHeads
from tieredstore.objectstore.base import ObjectStore

__all__ = ["KEEP_VERSIONS", "HeadLog"]


class HeadLog(VersionedHeads[pb.QueueHead]):
    """Loads the newest head of a queue and writes the next one."""

    def __init__(self, store: ObjectStore, queue: QueuePath) -> None:
        super().__init__(
            store,
            queue,
            decode=decode_head,
            fenced=lambda message: MetadataFenced(message, queue=queue.name),
            error=lambda message: MetadataError(message, queue=queue.name),
            corrupt=CorruptMetadata,
        )
        self.queue = queue
