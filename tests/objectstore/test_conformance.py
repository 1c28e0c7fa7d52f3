"""ObjectStore conformance: the shipped suite (tieredstore.testing.ObjectStoreTests)
run against memory, local directory, moto and SeaweedFS.

Each class below is what a third-party backend writes: a subclass that builds
a fresh store per test. Where a test server departs from AWS S3 it says so
with the suite's departure flags, which skip that one assertion for it;
memory and local are always held to what AWS S3 does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conftest import make_s3_store
from tests.servers import S3Server
from tieredstore.errors import InvalidRequest
from tieredstore.objectstore import ByteRange, LocalObjectStore, MemoryObjectStore, ObjectStore
from tieredstore.testing import ObjectStoreTests


class TestMemory(ObjectStoreTests):
    async def make_store(self) -> ObjectStore:
        return MemoryObjectStore()


class TestLocal(ObjectStoreTests):
    put_etags_not_md5 = True  # CRC32C and size (objectstore/local.py)

    @pytest.fixture(autouse=True)
    def _root(self, tmp_path: Path) -> None:
        self.root = tmp_path / "objects"

    async def make_store(self) -> ObjectStore:
        return LocalObjectStore(self.root, fsync=False)


class TestMoto(ObjectStoreTests):
    # moto answers 500 (a KeyError inside it) where AWS answers 404 NoSuchUpload.
    unknown_upload_is_server_error = True
    # moto looks an upload id up alone, whatever the key.
    upload_id_not_bound_to_key = True
    # moto copies what exists of the range; AWS answers 416 InvalidRange.
    copy_range_past_source_end_allowed = True

    @pytest.fixture(autouse=True)
    def _server(self, moto: S3Server) -> None:
        self.server = moto

    async def make_store(self) -> ObjectStore:
        return await make_s3_store(self.server)


class TestSeaweedFS(ObjectStoreTests):
    # SeaweedFS lists directory by directory, folds "//" in a listing prefix,
    # gives copied parts ETags that are not their MD5 (unquoted, even
    # "<hex>-2"), and answers an empty part list with 404 NoSuchUpload (keeping
    # the upload) where AWS answers 400 MalformedXML.
    lists_by_directory = True
    folds_double_slash = True
    copied_part_etags_not_md5 = True
    empty_complete_is_no_such_upload = True

    @pytest.fixture(autouse=True)
    def _server(self, seaweedfs: S3Server) -> None:
        self.server = seaweedfs

    async def make_store(self) -> ObjectStore:
        return await make_s3_store(self.server)


def test_byte_range_refuses_negative_start_and_empty_length() -> None:
    with pytest.raises(InvalidRequest):
        ByteRange(-1, 10)
    with pytest.raises(InvalidRequest):
        ByteRange(0, 0)
    assert ByteRange(10, 5).http_header() == "bytes=10-14"  # the HTTP end is inclusive
    assert ByteRange(10, 5).end == 15


def test_the_suite_needs_make_store() -> None:
    """A subclass that forgets make_store fails every test, saying why."""
    with pytest.raises(NotImplementedError, match="make_store"):
        asyncio.run(ObjectStoreTests().test_empty_object())
