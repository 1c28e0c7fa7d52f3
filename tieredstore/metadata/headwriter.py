"""One writer of a series of heads and the immutable pages they reference:
the write rules of queue and managed-ledger metadata, each over its own head
message (``H``; ``R`` the records its pages hold).

Writes are serialized (``_write_lock``). Before a write a fenced writer
refuses, and a head create that failed without an answer is settled: this
writer's random session id in the newest head says it landed (adopted);
another writer's head there fences. A head is stamped by the caller's
``stamp`` and published as the next version (the CAS is
:class:`~tieredstore.metadata.versions.VersionedHeads`'); the writer stands on
it once it has landed, unless the listing after it fences the writer: then it
stands on the head before (one that a successor's heads descend from). A page
is created once, before the head that references it: its key names a digest of
its bytes, so bytes found there are these (written before), or damaged
(replaced, once). A page read is checked and read again if it fails its checks
(only damage that repeats is believed); the records of the pages used last are
kept in an :class:`~tieredstore.lru.LRU`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from tieredstore.errors import Corrupt, ObjectNotFound
from tieredstore.lru import LRU
from tieredstore.metadata.pages import P, PageSet
from tieredstore.metadata.versions import VersionedHeads
from tieredstore.objectstore.conditional import create_once
from tieredstore.objectstore.reads import read_again_if
from tieredstore.tasks import PriorityLock, SingleFlight, gather_bounded

log = logging.getLogger(__name__)

H = TypeVar("H")
R = TypeVar("R")
T = TypeVar("T")

# stamp(head, version, writer_id, session_id, written_at_ms): the head's own fields.
Stamp = Callable[[H, int, str, str, int], None]

PAGE_WRITE_CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class NewPage(Generic[P, R]):
    """A page of series ``series`` that the next head will reference. ``data``
    None: already written."""

    series: int
    ref: P
    records: Sequence[R]
    data: bytes | None


class HeadWriter(Generic[H, R, P]):
    """Stands on one head (``_head`` at ``_version``), writes the next, keeps
    the records of the pages used last (``_cache``) and the page keys listed
    for each series of pages (:meth:`_listed_pages`)."""

    def __init__(
        self,
        heads: VersionedHeads[H],
        head: H,
        version: int,
        *,
        writer_id: str,
        stamp: Stamp[H],
        session_of: Callable[[H], str],
        encode: Callable[[H], bytes],
        corrupt: Callable[[str], Exception],
        span: Callable[[P], tuple[int, int]],
        cache_pages: int,
        missing: Callable[[str], Exception] | None = None,
    ) -> None:
        self._store = heads.store
        self._heads = heads
        self._head = head
        self._version = version
        self._writer_id = writer_id
        self._session_id = uuid.uuid4().hex
        # Priority inheritance: the host's write waiting here lifts the requests
        # of a background one (a merge recording its segment) under way.
        self._write_lock = PriorityLock()
        self._cache: LRU[str, tuple[R, ...]] = LRU(cache_pages)
        self._reading: SingleFlight[str, tuple[R, ...]] = SingleFlight()  # pages being read
        self._stamp = stamp
        self._session_of = session_of
        self._encode = encode
        self._corrupt = corrupt
        self._missing = missing or corrupt  # a page the head references is not there
        self._span = span
        self._pagesets: dict[int, PageSet[P]] = {}
        self._pageset_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._pages_generation: defaultdict[int, int] = defaultdict(int)
        self.page_writes = 0
        # Awaited before each head is published: raises once this writer is
        # replaced (the store's writer check, docs/writers.md).
        self.before_publish: Callable[[], Awaitable[None]] | None = None

    @property
    def version(self) -> int:
        """The version of the head stood on (0: none written yet)."""
        return self._version

    @property
    def fenced(self) -> bool:
        return self._heads.fenced is not None

    def _check_writable(self) -> None:
        self._heads.check_not_fenced()

    async def _begin_write(self) -> None:
        self._check_writable()
        if self._heads.unsettled:
            await self._settle()

    async def _settle(self) -> None:
        adopted = await self._heads.settle(self._version, self._session_id, self._session_of)
        if adopted is not None:
            self._version, self._head = adopted
            self._forget_pages()  # its pages: list again when needed

    def _forget_pages(self) -> None:
        """Drop the page listings: pages were committed that this process did not see."""
        for series in list(self._pagesets):
            del self._pagesets[series]
            self._pages_generation[series] += 1

    async def _commit_pages(self, head: H, pages: Sequence[NewPage[P, R]]) -> None:
        """Write ``pages``, then stamp ``head`` and write it as the next version;
        once it has landed, stand on it and keep listings and cache up to date."""
        await gather_bounded(PAGE_WRITE_CONCURRENCY, lambda page: self._write_page(*page),
                             [(p.ref.key, p.data) for p in pages if p.data is not None])
        version = self._version + 1
        self._stamp(head, version, self._writer_id, self._session_id,
                    time.time_ns() // 1_000_000)

        def stand() -> None:
            self._head, self._version = head, version
            for page in pages:
                self._pages_generation[page.series] += 1
                pageset = self._pagesets.get(page.series)
                if pageset is not None:
                    pageset.add(page.ref)
                self._cache.put(page.ref.key, tuple(page.records))

        stood = self._head, self._version
        if self.before_publish is not None:
            await self.before_publish()
        try:
            await self._heads.publish(version, self._encode(head), stand)
        except BaseException:
            if self.fenced:
                # It may have landed on a key freed by the deletion of old heads,
                # behind a newer writer's: then it is no head of the series. Stand
                # on the head before it, which was one: a fenced writer still reads
                # its head (a GC pass takes its first pointers), and that must
                # never run ahead of its successor's.
                self._head, self._version = stood
            raise

    async def _page_records(self, key: str, decode: Callable[[bytes], Sequence[R]]
                            ) -> tuple[R, ...]:
        """The records of page ``key``: cached, or read (:meth:`_read_page`, once for
        every concurrent lookup) and cached."""
        records = self._cache.get(key)
        if records is not None:
            return records

        async def read() -> tuple[R, ...]:
            records = tuple(await self._read_page(key, decode))
            self._cache.put(key, records)
            return records

        return await self._reading.run(key, read)

    async def _read_page(self, key: str, decode: Callable[[bytes], T]) -> T:
        """Page ``key`` decoded, read again if it fails its checks (a read damaged
        on the way is not the page's damage: only a failure that repeats is
        believed). A page not there is not read again: a 404 is no damage on
        the way, and the open's look for a page a crash left costs one GET."""

        async def once() -> T:
            return decode(bytes(await self._store.get(key)))

        try:
            return await read_again_if(Corrupt, once)
        except ObjectNotFound:
            raise self._missing(f"page {key} is missing") from None

    async def _write_page(self, key: str, data: bytes) -> None:
        for attempt in range(2):
            if await create_once(self._store, key, data):
                self.page_writes += 1
                return
            if attempt == 0:  # damaged (or gone meanwhile)
                log.warning("%s: replacing damaged page %s", self._heads.keys.name, key)
                await self._store.delete(key)
                self._cache.pop(key)
        raise self._corrupt(f"page {key} could not be written")

    async def _listed_pages(self, series: int, prefix: str, parse: Callable[[str], P | None]
                            ) -> PageSet[P]:
        """Every page key of ``series`` (under ``prefix``; keys that are no page:
        ignored): listed once, then kept up to date."""
        pageset = self._pagesets.get(series)
        if pageset is not None:
            return pageset
        async with self._pageset_locks[series]:
            pageset = self._pagesets.get(series)
            if pageset is not None:
                return pageset
            while True:  # a page committed during the listing may be missing: list again
                generation = self._pages_generation[series]
                refs: list[P] = []
                for info in await self._store.list_all(prefix):
                    ref = parse(info.key)
                    if ref is None:
                        log.warning("%s: ignoring %r: not a page key", self._heads.keys.name,
                                    info.key)
                    else:
                        refs.append(ref)
                if generation == self._pages_generation[series]:
                    break
            pageset = PageSet(self._span, refs)
            self._pagesets[series] = pageset
            return pageset

    async def _drop_pages(self, pageset: PageSet[P], keys: list[str]) -> int:
        """Delete the pages ``keys`` of ``pageset``, and forget them."""
        if keys:
            await self._store.delete_many(keys)
            pageset.discard(keys)
            for key in keys:
                self._cache.pop(key)
        return len(keys)
