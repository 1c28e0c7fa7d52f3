"""The frame of :class:`~tieredstore.testing.ObjectStoreTests`: the departures
from AWS S3 a test server may declare, what a subclass provides, and the
helpers the groups of cases share."""

from __future__ import annotations

import contextlib
import hashlib
import random
from collections.abc import AsyncIterator, Iterable

from tieredstore.objectstore.base import ObjectStore, PartInfo
from tieredstore.tasks import gather_bounded

# Requests in flight at once when a test writes many objects.
_CONCURRENCY = 32


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def check_put_etag(suite: ObjectStoreSuite, etag: str, data: bytes) -> None:
    """The ETag of an object put whole with ``data``: its quoted hex MD5 on S3."""
    if suite.put_etags_not_md5:
        assert etag.startswith('"') and etag.endswith('"') and len(etag) > 2, etag
    else:
        assert etag.strip('"') == md5(data), etag


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


async def put_all(store: ObjectStore, keys: Iterable[str], data: bytes = b"x") -> None:
    async def put(key: str) -> None:
        await store.put(key, data)

    await gather_bounded(_CONCURRENCY, put, keys)


async def listed_keys(store: ObjectStore, prefix: str) -> list[str]:
    return [o.key for o in await store.list_all(prefix)]


async def a_part(store: ObjectStore) -> PartInfo:
    """A part as a caller would list it, from an upload that is then aborted."""
    upload_id = await store.create_multipart("mp/other")
    part = await store.upload_part("mp/other", upload_id, 1, b"data")
    await store.abort_multipart("mp/other", upload_id)
    return part


class StoreSuite:
    """The store a conformance suite's cases run on: :meth:`make_store`'s, closed
    after each case by :meth:`close_store`."""

    async def make_store(self) -> ObjectStore:
        """A new, empty store. Each test calls it once."""
        raise NotImplementedError(f"{type(self).__name__} must define make_store()")

    async def close_store(self, store: ObjectStore) -> None:
        """Release a store :meth:`make_store` built (by default ``store.close()``)."""
        await store.close()

    @contextlib.asynccontextmanager
    async def store(self) -> AsyncIterator[ObjectStore]:
        """A store from :meth:`make_store`, closed on the way out."""
        store = await self.make_store()
        try:
            yield store
        finally:
            await self.close_store(store)


class ObjectStoreSuite(StoreSuite):
    """What every group of ObjectStore cases stands on: the departures a test
    server declares, and the store a subclass builds."""

    # --- departures from AWS S3 a test server may declare ------------------------

    lists_by_directory: bool = False
    """Listings go directory by directory (SeaweedFS): ``a/b/...`` comes before
    ``a/b-c`` though ``-`` sorts before ``/``. AWS sorts whole keys by bytes."""

    folds_double_slash: bool = False
    """A listing prefix's ``//`` is read as ``/`` (SeaweedFS); AWS compares bytes."""

    copied_part_etags_not_md5: bool = False
    """UploadPartCopy answers ETags that are not the part's MD5 (SeaweedFS), so
    the object's ETag is not AWS's MD5-of-part-MD5s."""

    put_etags_not_md5: bool = False
    """A whole object's ETag is not the MD5 of its bytes (the local backend: its
    CRC32C and size; AWS too under SSE-KMS). It is still the same for the same
    bytes and differs for other bytes."""

    empty_complete_is_no_such_upload: bool = False
    """Completing with no parts answers NoSuchUpload (SeaweedFS) where AWS
    answers MalformedXML (InvalidRequest)."""

    unknown_upload_is_server_error: bool = False
    """An unknown upload id answers 500 (moto) where AWS answers NoSuchUpload."""

    upload_id_not_bound_to_key: bool = False
    """An upload id is looked up without its key (moto): a part sent with the
    wrong key is taken, an abort with the wrong key aborts."""

    copy_range_past_source_end_allowed: bool = False
    """UploadPartCopy copies what exists of a range past the source's end
    (moto) where AWS answers InvalidRange."""
