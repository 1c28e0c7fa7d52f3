"""QueueView: one queue, read-only, over what is durable in the bucket.

The store's own reading code (:class:`QueueReading`) over two or three
:class:`FlatView` s (see :mod:`tieredstore.store.view`): what ``tieredstore
verify``, ``consume``, ``query`` and Spark's reads see, and what a
:class:`ReadOnlyMessageStore` answers with.
"""

from __future__ import annotations

from tieredstore.config import TieredStoreConfig
from tieredstore.log import LogSnapshot
from tieredstore.metadata import QueueMetadata
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import DirectReader, FileType
from tieredstore.segment.reader import SegmentReader
from tieredstore.store import properties
from tieredstore.store.bykey import KeyQuery, find_entries
from tieredstore.store.codec import RecordCodec
from tieredstore.store.keyentries import KeyEntry
from tieredstore.store.keys import log_path
from tieredstore.store.reading import QueueReading
from tieredstore.store.record import UNIT_SIZE
from tieredstore.store.view import FlatView, open_metadata


class QueueView(QueueReading):
    """One queue, read-only: offsets, ``get`` and ``offset_for_time`` as the store
    answers them (the same code), over what is durable in the bucket."""

    cl: FlatView
    cq: FlatView

    def __init__(self, topic: str, queue_id: int, meta: QueueMetadata, cl: FlatView,
                 cq: FlatView, *, index: FlatView | None = None) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.meta = meta
        self.cl = cl
        self.cq = cq
        self.index = index  # the key index, if the queue has one (listed when first read)

    @classmethod
    async def open(cls, store: ObjectStore, config: TieredStoreConfig, topic: str,
                   queue_id: int, reader: SegmentReader | None = None, *,
                   log: LogSnapshot | None = None, codec: RecordCodec | None = None
                   ) -> QueueView:
        """``reader``: what reads segments (one GET per read, if None); ``log``: the
        broker's log as loaded before this call (loaded here if None); ``codec``:
        what opens compressed or encrypted records (from ``config``, with its key if
        it has one, if None)."""
        reader = reader or DirectReader(store)
        if log is None:
            log = await LogSnapshot.load(store, log_path(config))
        meta = await open_metadata(store, config, topic, queue_id, log=log)
        cl, cq, index = (FlatView(store, config, meta, topic=topic, queue_id=queue_id,
                                  file_type=t, reader=reader, log=log)
                         for t in (FileType.COMMIT_LOG, FileType.CONSUME_QUEUE, FileType.INDEX))
        # The consume queue first: every unit it holds then points into commit-log
        # bytes stored before the commit log is listed (a live writer goes on).
        await cq.open()
        await cl.open()
        has_index = properties.index_from(meta.properties) is not None
        view = cls(topic, queue_id, meta, cl, cq, index=index if has_index else None)
        view.codec = codec or RecordCodec.from_config(config, strict=False)
        return view

    @property
    def max_offset(self) -> int:
        """One past the last offset whose consume-queue unit is durable."""
        return self.cq.end // UNIT_SIZE

    @property
    def clean_from(self) -> int:
        return properties.clean_from(self.meta.properties)

    async def key_entries(self, q: KeyQuery) -> list[KeyEntry]:
        return [] if self.index is None else await find_entries(self.meta, self.index, q)

