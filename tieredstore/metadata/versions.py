"""Versioned heads: a mutable head as a series of immutable ``head-{v}`` objects.

Version ``v`` is the object ``head-{v:020d}``, created with ``If-None-Match: *``.
Creating ``head-{v+1}`` is the compare-and-swap: of two writers at ``v`` one
gets the key, the other ``PreconditionFailed`` and is fenced.

Older versions are deleted once a newer one stands (the newest two are kept,
so that a reader that listed just before a write still finds its head). That
deletion opens a hole in the CAS as such: a writer two or more versions
behind finds its next key free again and its create succeeds. So every write
is followed by one listing of the heads; a version above ours there means we
were behind, and we are fenced before doing anything else. (The free key
reappears only after a newer head was written and listed, so the listing
that follows our write sees that newer head.)

Used by queue metadata (:func:`tieredstore.metadata.reader.queue_heads`) and
managed-ledger metadata (:mod:`tieredstore.ledger.managed.meta.metadata`), each with
its own head message, keys and errors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from tieredstore.errors import ObjectNotFound, ObjectStoreError, ServerError
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.conditional import create_once
from tieredstore.objectstore.reads import crc_metadata

log = logging.getLogger(__name__)

KEEP_VERSIONS = 2
LOAD_ATTEMPTS = 5
READ_ATTEMPTS = 6

H = TypeVar("H")


class HeadKeys(Protocol):
    """Where a series of heads lives."""

    @property
    def name(self) -> str: ...

    @property
    def heads_prefix(self) -> str: ...

    def head_key(self, version: int) -> str: ...

    def head_version(self, key: str) -> int | None: ...


class VersionedHeads(Generic[H]):
    """Loads the newest head of a series and writes the next one.

    ``decode(data, key, version)`` parses a head and raises ``corrupt`` for
    bytes that are not a valid head; ``fenced(message)`` and
    ``error(message)`` build the caller's own exceptions. A writer's state
    lives here too: ``fenced`` (the error that fenced it, for good) and
    ``unsettled`` (a create failed without an answer: it may have landed).
    """

    def __init__(
        self,
        store: ObjectStore,
        keys: HeadKeys,
        *,
        decode: Callable[[bytes, str, int], H],
        fenced: Callable[[str], Exception],
        error: Callable[[str], Exception],
        corrupt: type[Exception],
    ) -> None:
        self.store = store
        self.keys = keys
        self._decode = decode
        self._corrupt = corrupt
        self._fenced = fenced
        self._error = error
        self.fenced: Exception | None = None
        self.unsettled = False

    def check_not_fenced(self) -> None:
        if self.fenced is not None:
            raise self._fenced(f"fenced earlier: {self.fenced}")

    async def publish(self, version: int, data: bytes, landed: Callable[[], None]) -> None:
        """Write head ``version``, call ``landed()`` once it stands, then confirm
        it (see :meth:`confirm`). A fence is remembered in ``fenced``; any other
        failure of the create leaves ``unsettled`` for :meth:`settle`."""
        try:
            await self.create(version, data)
        except BaseException:
            if self.fenced is None:
                self.unsettled = True
            raise
        landed()
        await self.confirm(version)

    async def settle(self, version: int, session_id: str, session_of: Callable[[H], str]
                     ) -> tuple[int, H] | None:
        """After an unanswered create of ``version + 1``: the newest head if it is
        ours (it landed: adopt it), None if nothing moved; fenced if another
        writer's head stands there."""
        loaded = await self.load()
        newest, session = (loaded[0], session_of(loaded[1])) if loaded else (0, "")
        adopted = None
        if loaded is not None and newest == version + 1 and session == session_id:
            adopted = loaded
        elif newest != version:
            self.fenced = self._fenced(f"head version {newest} is newer than ours ({version})")
            raise self.fenced
        self.unsettled = False
        return adopted

    async def versions(self) -> list[int]:
        """Every head version present, ascending. One LIST request."""
        found: list[int] = []
        async for page in self.store.list_pages(self.keys.heads_prefix):
            for info in page:
                version = self.keys.head_version(info.key)
                if version is None:
                    log.warning("ignoring %r: not a head key", info.key)
                else:
                    found.append(version)
        return sorted(found)

    async def load(self) -> tuple[int, H] | None:
        """The newest valid head, and the newest version present (what the next
        write follows), or None when there is no head.

        A LIST and a GET. A head deleted between the two (two newer ones were
        written meanwhile) sends us round again. A newest head that is damaged
        (its CRC or contents fail) is skipped for the newest valid one before
        it, said in the log; if none is valid, the caller's ``corrupt`` error.
        """
        for _ in range(LOAD_ATTEMPTS):
            versions = await self.versions()
            if not versions:
                return None
            damaged: list[Exception] = []
            for version in reversed(versions):
                try:
                    head = await self._read(version)
                except ObjectNotFound:
                    break  # deleted under us: list again
                except self._corrupt as exc:
                    log.warning("%s: skipping damaged head: %s", self.keys.name, exc)
                    damaged.append(exc)
                    continue
                return versions[-1], head
            else:
                raise damaged[0]  # none is valid: the newest one's damage
        raise self._error(f"the head kept changing while it was loaded ({LOAD_ATTEMPTS} "
                          "attempts)")

    async def _read(self, version: int) -> H:
        """Head ``version``. A read that fails its check is read again: damage in
        the bucket returns the same bytes twice, all of the object, a read damaged
        on the way (bits flipped, bytes cut short) does not. Only the former is the caller's
        ``corrupt`` error (it falls back to an older head); reads that keep
        coming back damaged and different are a transient failure."""
        key = self.keys.head_key(version)
        previous: bytes | None = None
        for _ in range(READ_ATTEMPTS):
            found = await self.store.get_object(key)
            data = bytes(found.data)  # small: a copy only of a mapped page
            try:
                return self._decode(data, key, version)
            except self._corrupt:
                # Cut short on the way (fewer bytes than the object holds): never
                # the bucket's damage, however often the same cut comes back.
                if data == previous and len(data) == found.info.size:
                    raise
                previous = data
        raise ServerError(f"{key}: {READ_ATTEMPTS} reads came back damaged, each differently",
                          op="get", key=key)

    async def create(self, version: int, data: bytes) -> None:
        """Create head ``version``; fenced if another writer holds it.

        A create that finds its key taken by identical bytes succeeded before
        (a retried request whose first answer was lost): the bytes carry this
        writer's random session id, so nobody else writes them.
        """
        if await create_once(self.store, self.keys.head_key(version), data,
                             metadata=crc_metadata(data)):
            return
        self.fenced = self._fenced(f"head version {version} was written by another writer")
        raise self.fenced

    async def confirm(self, version: int) -> None:
        """After creating ``version``: fenced if a newer head exists, else drop
        the versions older than the newest two. One LIST, at most one DELETE."""
        versions = await self.versions()
        if versions and versions[-1] > version:
            self.fenced = self._fenced(f"head version {versions[-1]} is newer than ours "
                                       f"({version})")
            raise self.fenced
        old = [self.keys.head_key(v) for v in versions if v <= version - KEEP_VERSIONS]
        if old:
            try:
                await self.store.delete_many(old)
            except ObjectStoreError as exc:  # harmless: the next write deletes them
                log.warning("%s: could not delete old heads: %s", self.keys.name, exc)
