"""SegmentReaderTests: the SegmentReader contract, as a suite a reader subclasses.

A :class:`tieredstore.segment.SegmentReader` turns a segment's layout (its
units: runs of bytes in one object, each checked by one CRC32C) back into
bytes. :class:`tieredstore.segment.DirectReader` and
:class:`tieredstore.fetcher.Fetcher` are two; a third-party reader (another
cache, another transport) runs this suite to show it keeps the contract:

* ``read`` returns exactly the bytes committed, for any range across units;
* every unit is checked: a byte changed in the bucket raises
  ``IntegrityError``, a short object ``IntegrityError``, a missing object
  ``ChunkMissing``, a hole (``ChunkRef(missing=True)``) ``CorruptSegment``,
  each with ``.span``, the unit's ``[position, end)``, and ``.segment``;
  a check failure that does not repeat (a flip on the wire) is read again;
* ``committed`` and ``forget`` never break later reads, and after ``forget``
  nothing held for the segment is served again.

A subclass defines :meth:`SegmentReaderTests.make_reader`; the store under it
is a ``MemoryObjectStore`` unless it overrides :meth:`SegmentReaderTests.make_store`::

    from tieredstore.objectstore import ObjectStore
    from tieredstore.segment import SegmentReader
    from tieredstore.testing import SegmentReaderTests
    from my_package import MyReader

    class TestMyReader(SegmentReaderTests):
        async def make_reader(self, store: ObjectStore) -> SegmentReader:
            return MyReader(store)

The tests are coroutines: run them with pytest-asyncio (auto mode, or
``pytestmark = pytest.mark.asyncio`` on the subclass). A reader with an async
``close()`` is closed after each test (see :meth:`SegmentReaderTests.close_reader`).
"""

from __future__ import annotations

from tieredstore.testing._reader_checks import CheckCases
from tieredstore.testing._reader_lifecycle import LifecycleCases
from tieredstore.testing._reader_reading import ReadingCases

__all__ = ["SegmentReaderTests"]


# pytest runs a base class's tests before a subclass's, the last base first:
# the groups are listed in reverse so that they run reading, checks, lifecycle.
class SegmentReaderTests(LifecycleCases, CheckCases, ReadingCases):
    """The SegmentReader conformance suite. Subclass it and define :meth:`make_reader`.

    The cases come in three groups, one module each: reading what was
    committed (:mod:`tieredstore.testing._reader_reading`), every unit checked
    (:mod:`~tieredstore.testing._reader_checks`), and ``committed`` /
    ``forget`` (:mod:`~tieredstore.testing._reader_lifecycle`), on the frame
    in :mod:`~tieredstore.testing._reader_base` that holds :meth:`make_reader`
    and the segments the cases write.
    """
