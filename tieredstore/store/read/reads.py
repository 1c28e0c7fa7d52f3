"""The store's read API, stated once for the writing and the read-only store:
each method checks its arguments and hands the read to the
:class:`~tieredstore.store.read.reading.QueueReading` the store names."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Collection

from tieredstore.sizes import MiB
from tieredstore.store.base import arguments
from tieredstore.store.base.arguments import MAX_TIMESTAMP
from tieredstore.store.formats.record import Message
from tieredstore.store.read.around import AroundDamage
from tieredstore.store.read.bykey import KeyQuery, newest
from tieredstore.store.read.reading import QueueReading
from tieredstore.store.read.tagged import MAX_SCAN, Tagged


class QueueReads(abc.ABC):
    """The public read methods, over the queue readings a store hands out."""

    @abc.abstractmethod
    async def _reading(self, topic: str, queue_id: int, *, at: int | None = None,
                       fresh: bool = False) -> QueueReading:
        """The reading of one queue, for a read from offset ``at`` (if given);
        ``fresh``: one that sees what was written up to now."""

    @abc.abstractmethod
    async def _readings(self, topic: str) -> list[QueueReading]:
        """The readings of every queue of ``topic``, fresh."""

    async def get(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
                  max_bytes: int = 4 * MiB) -> list[Message]:
        """Up to ``max_count`` messages from ``offset`` (at least one if any, even
        past ``max_bytes``). ``offset == max_offset`` gives an empty list."""
        arguments.check_get(topic, queue_id, offset, max_count, max_bytes)
        reading = await self._reading(topic, queue_id, at=offset)
        return await reading.get(offset, max_count, max_bytes)

    async def get_around_damage(self, topic: str, queue_id: int, offset: int,
                                max_count: int = 32, max_bytes: int = 4 * MiB) -> AroundDamage:
        """As :meth:`get`, but damage in the bucket does not stop it: what cannot
        be read is stepped over and reported, each range of offsets with its
        reason (``skipped``), and ``next_offset`` says where the next call starts.
        Every message returned passed ``get``'s checks; an error that is not
        damage (an outage) is raised as ``get`` raises it
        (:mod:`tieredstore.store.read.around`)."""
        arguments.check_get(topic, queue_id, offset, max_count, max_bytes)
        reading = await self._reading(topic, queue_id, at=offset)
        return await reading.get_around_damage(offset, max_count, max_bytes)

    async def get_by_tags(self, topic: str, queue_id: int, offset: int,
                          tags: str | Collection[str], *, max_count: int = 32,
                          max_bytes: int = 4 * MiB, max_scan: int = MAX_SCAN) -> Tagged:
        """Messages from ``offset`` whose tags are ``tags`` (or one of them), up to
        ``max_count``, looking at up to ``max_scan`` offsets; ``next_offset`` is where
        the next call starts. Decided from the consume queue's tag hashes: the
        commit log is read for matching messages only (:mod:`tieredstore.store.read.tagged`)."""
        wanted = arguments.tag_filter(topic, queue_id, offset, tags, max_count=max_count,
                                      max_bytes=max_bytes, max_scan=max_scan)
        reading = await self._reading(topic, queue_id, at=offset)
        return await reading.get_by_tags(offset, wanted, max_count, max_bytes, max_scan)

    async def query_by_key(self, topic: str, key: str, begin_ms: int = 0,
                           end_ms: int = MAX_TIMESTAMP, max_count: int = 64) -> list[Message]:
        """The newest ``max_count`` messages of ``topic`` (every queue) that carry
        ``key`` and were stored in ``[begin_ms, end_ms]``, oldest first. Found
        through each queue's key index (:mod:`tieredstore.store.read.bykey`)."""
        arguments.check_query_by_key(topic, key, begin_ms, end_ms, max_count)
        wanted = KeyQuery(key, begin_ms, end_ms, max_count)
        readings = await self._readings(topic)
        return newest(await asyncio.gather(*(r.query_by_key(wanted) for r in readings)),
                      max_count)

    async def offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (max_offset if none)."""
        arguments.check_offset_for_time(topic, queue_id, timestamp_ms)
        return await (await self._reading(topic, queue_id)).offset_for_time(timestamp_ms)

    async def min_offset(self, topic: str, queue_id: int) -> int:
        """The first offset still stored."""
        arguments.check_queue(topic, queue_id)
        return (await self._reading(topic, queue_id)).min_offset

    async def max_offset(self, topic: str, queue_id: int) -> int:
        """The offset the next append gets: one past the last one stored (of a
        corrupt queue, or in the read-only store: the last durable one)."""
        arguments.check_queue(topic, queue_id)
        return (await self._reading(topic, queue_id, fresh=True)).max_offset
