"""ObjectStoreTests: the ObjectStore contract, as a suite a backend subclasses.

Every backend of :class:`tieredstore.objectstore.ObjectStore` promises S3's
semantics (see :mod:`tieredstore.objectstore.base`). This class holds the
cases that check it; a backend's test module subclasses it and says how to
build a store, zarr's ``StoreTests`` style::

    # test_my_backend.py (pytest with pytest-asyncio, asyncio_mode = "auto")
    import pytest
    from tieredstore.objectstore import ObjectStore
    from tieredstore.testing import ObjectStoreTests
    from my_package import MyObjectStore

    class TestMyObjectStore(ObjectStoreTests):
        @pytest.fixture(autouse=True)
        def _root(self, tmp_path):          # any fixture the store needs
            self.root = tmp_path

        async def make_store(self) -> ObjectStore:   # a new, empty store per test
            return MyObjectStore(self.root)

Every ``test_*`` method then runs against the store: pytest makes a new
instance of the class per test, runs its autouse fixtures, and the test
calls :meth:`ObjectStoreTests.make_store` once, closing the store at its end
with :meth:`ObjectStoreTests.close_store`. The tests are coroutines: run
them with pytest-asyncio in auto mode, or mark the subclass
(``pytestmark = pytest.mark.asyncio``) in strict mode. The kit does not
import pytest; for pytest's detailed assertion messages, call
``pytest.register_assert_rewrite("tieredstore.testing")`` in your
``conftest.py`` before importing it.

A store is held to what AWS S3 does. A test server that departs from it in a
known way declares the departure with one of the suite's class attributes
(``lists_by_directory``, ``unknown_upload_is_server_error``...: see
:class:`~tieredstore.testing._objectstore_base.ObjectStoreSuite`; each
defaults to False), and the one assertion it concerns is skipped for it.
"""

from __future__ import annotations

from tieredstore.testing._objectstore_listing import ListingCases
from tieredstore.testing._objectstore_multipart import MultipartCases
from tieredstore.testing._objectstore_objects import ObjectCases

__all__ = ["ObjectStoreTests"]


# pytest runs a base class's tests before a subclass's, the last base first:
# the groups are listed in reverse so that they run objects, listing, multipart.
class ObjectStoreTests(MultipartCases, ListingCases, ObjectCases):
    """The ObjectStore conformance suite. Subclass it and define :meth:`make_store`.

    The cases come in three groups, one module each: single objects
    (:mod:`tieredstore.testing._objectstore_objects`), listing and deleting
    (:mod:`~tieredstore.testing._objectstore_listing`) and multipart uploads
    (:mod:`~tieredstore.testing._objectstore_multipart`), on the frame in
    :mod:`~tieredstore.testing._objectstore_base` that holds the departure
    flags and :meth:`make_store`.
    """
