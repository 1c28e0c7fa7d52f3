"""Test tooling shipped with the library.

* Conformance suites a third-party backend runs against its own code
  (zarr's ``StoreTests`` style): :class:`ObjectStoreTests` for an
  :class:`~tieredstore.objectstore.ObjectStore`, :class:`SegmentReaderTests`
  for a :class:`~tieredstore.segment.SegmentReader`. Subclass one and define
  its ``make_store`` / ``make_reader`` (any autouse fixture it needs may set
  attributes first): pytest makes an instance per test and every ``test_*``
  case runs against what it builds, closed at the case's end (``close_store``,
  ``close_reader``). The cases are coroutines: run them with pytest-asyncio in
  auto mode, or mark the subclass (``pytestmark = pytest.mark.asyncio``) in
  strict mode. The kit does not import pytest; for pytest's detailed assertion
  messages, call ``pytest.register_assert_rewrite("tieredstore.testing")`` in
  your ``conftest.py`` before importing it.
* A fault-injecting ObjectStore for chaos tests, and a forwarding one to build
  test wrappers on.
"""

from tieredstore.objectstore import ForwardingObjectStore
from tieredstore.testing._objectstore_listing import ListingCases
from tieredstore.testing._objectstore_multipart import MultipartCases
from tieredstore.testing._objectstore_objects import ObjectCases
from tieredstore.testing._reader_checks import CheckCases
from tieredstore.testing._reader_lifecycle import LifecycleCases
from tieredstore.testing._reader_reading import ReadingCases
from tieredstore.testing.faults import (
    BEFORE_KINDS,
    DATA_KINDS,
    FAULT_OPS,
    FaultKind,
    FaultSchedule,
    FaultyObjectStore,
    InjectedFault,
)

# pytest runs a base class's tests before a subclass's, the last base first:
# each suite lists its groups in reverse so that they run in the order named.


class ObjectStoreTests(MultipartCases, ListingCases, ObjectCases):
    """The ObjectStore contract, S3's semantics (:mod:`tieredstore.objectstore.base`),
    as a suite: subclass it and define :meth:`make_store`, a new empty store.

    The cases come in three groups, one module each: single objects
    (:mod:`~tieredstore.testing._objectstore_objects`), listing and deleting
    (:mod:`~tieredstore.testing._objectstore_listing`) and multipart uploads
    (:mod:`~tieredstore.testing._objectstore_multipart`). A store is held to
    what AWS S3 does; a test server that departs from it in a known way declares
    the departure with one of the flags of
    :class:`~tieredstore.testing._objectstore_base.ObjectStoreSuite`
    (``lists_by_directory``, ``unknown_upload_is_server_error``...; each
    defaults to False), and the one assertion it concerns is skipped for it.
    """


class SegmentReaderTests(LifecycleCases, CheckCases, ReadingCases):
    """The SegmentReader contract as a suite: subclass it and define
    :meth:`make_reader` (over a ``MemoryObjectStore`` unless ``make_store`` says
    otherwise; a reader with an async ``close()`` is closed after each test).

    A reader turns a segment's layout (its units: runs of bytes in one object,
    each checked by one CRC32C) back into bytes, as
    :class:`tieredstore.segment.DirectReader` and
    :class:`tieredstore.fetcher.Fetcher` do. The cases, one module per group:

    * ``read`` returns exactly the bytes committed, for any range across units
      (:mod:`~tieredstore.testing._reader_reading`);
    * every unit is checked: a byte changed in the bucket raises
      ``IntegrityError``, a short object ``IntegrityError``, a missing object
      ``ChunkMissing``, a hole (``ChunkRef(missing=True)``) ``CorruptSegment``,
      each with ``.span``, the unit's ``[position, end)``, and ``.segment``; a
      check failure that does not repeat is read again
      (:mod:`~tieredstore.testing._reader_checks`);
    * ``committed`` and ``forget`` never break later reads, and after ``forget``
      nothing held for the segment is served again
      (:mod:`~tieredstore.testing._reader_lifecycle`).
    """


__all__ = [
    "BEFORE_KINDS",
    "DATA_KINDS",
    "FAULT_OPS",
    "FaultKind",
    "FaultSchedule",
    "FaultyObjectStore",
    "ForwardingObjectStore",
    "InjectedFault",
    "ObjectStoreTests",
    "SegmentReaderTests",
]
