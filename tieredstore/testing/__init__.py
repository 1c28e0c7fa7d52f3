"""Test tooling shipped with the library.

* Conformance suites a third-party backend runs against its own code
  (zarr's ``StoreTests`` style): :class:`ObjectStoreTests` for an
  :class:`~tieredstore.objectstore.ObjectStore`, :class:`SegmentReaderTests`
  for a :class:`~tieredstore.segment.SegmentReader`. Subclass one, define its
  ``make_store`` / ``make_reader``, and pytest (with pytest-asyncio) runs every
  case against it; see :mod:`tieredstore.testing.objectstore` and
  :mod:`tieredstore.testing.reader`.
* A fault-injecting ObjectStore for chaos tests, and a forwarding one to build
  test wrappers on.
"""

from tieredstore.testing.faults import (
    BEFORE_KINDS,
    DATA_KINDS,
    FAULT_OPS,
    FaultKind,
    FaultSchedule,
    FaultyObjectStore,
    InjectedFault,
)
from tieredstore.testing.forwarding import ForwardingObjectStore
from tieredstore.testing.objectstore import ObjectStoreTests
from tieredstore.testing.reader import SegmentReaderTests

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
