"""Choosing pages from their keys. No IO.

A :class:`PageSet` holds every page key listed for one file type of a queue.
Against a head it splits into the pages wholly behind the ``first`` pointer
(to delete) and a :class:`PageView` of the live pages the head references:
the chain of ``prev_hash`` links walked back from the head's newest page.
Pages off the chain (left by a write whose head never landed) are ignored.
Lookups bisect the view by base offset, message offset or time.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from tieredstore.metadata.errors import PageMissing
from tieredstore.metadata.keys import PageRef


class PageView:
    """The live pages of one file type that a head references, in order.

    Page ``i`` covers base offsets ``[refs[i].first_base_offset, refs[i].end_offset)``.
    """

    __slots__ = ("_bases", "_messages", "_running_max", "refs")

    def __init__(self, refs: Sequence[PageRef]) -> None:
        self.refs = tuple(refs)
        self._bases = [r.first_base_offset for r in self.refs]
        self._messages = [r.first_message_offset for r in self.refs]
        self._running_max = list(itertools.accumulate(
            (r.max_end_timestamp_ms for r in self.refs), max
        ))

    def __len__(self) -> int:
        return len(self.refs)

    def locate_base(self, position: int) -> int | None:
        """The page whose range holds ``position``, if any."""
        i = bisect.bisect_right(self._bases, position) - 1
        return i if i >= 0 and position < self.refs[i].end_offset else None

    def start_for_base(self, position: int) -> int:
        """The first page that may hold a record ending after ``position``."""
        return max(0, bisect.bisect_right(self._bases, position) - 1)

    def locate_message(self, offset: int) -> int | None:
        """The last page whose first message offset is at most ``offset``."""
        i = bisect.bisect_right(self._messages, offset) - 1
        return i if i >= 0 else None

    def start_for_time(self, timestamp_ms: int) -> int:
        """The first page holding a record that ends at or after ``timestamp_ms``
        (``len(self)`` when none does)."""
        return bisect.bisect_left(self._running_max, timestamp_ms)


class PageSet:
    """Every page key listed for one file type, sorted by first base offset."""

    def __init__(self, refs: Iterable[PageRef] = ()) -> None:
        self._refs = sorted(refs, key=_order)
        self._keys = {r.key for r in self._refs}
        self._view_key: tuple[int, int, int] | None = None
        self._view: PageView | None = None

    def __len__(self) -> int:
        return len(self._refs)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    @property
    def refs(self) -> tuple[PageRef, ...]:
        return tuple(self._refs)

    def add(self, ref: PageRef) -> None:
        if ref.key not in self._keys:
            bisect.insort(self._refs, ref, key=_order)
            self._keys.add(ref.key)
            self._view_key = self._view = None

    def discard(self, keys: Iterable[str]) -> None:
        gone = set(keys) & self._keys
        if gone:
            self._refs = [r for r in self._refs if r.key not in gone]
            self._keys -= gone
            self._view_key = self._view = None

    def dead(self, first_base_offset: int) -> list[PageRef]:
        """Pages whose records all lie before ``first_base_offset``.

        On the chain or off it, such a page is never read again, and deleting
        it is safe even for a writer that is behind without knowing: ``first``
        only moves forward, and a page is only ever written with a live record.
        """
        return [r for r in self._refs if r.end_offset <= first_base_offset]

    def view(self, first_base_offset: int, paged_through: int, last_hash: int) -> PageView:
        """The live pages of the chain that ends at page ``last_hash``.

        ``PageMissing`` when the chain breaks before it reaches the page that
        holds the first live record (a page was deleted under a stale head, or
        lost).
        """
        key = (first_base_offset, paged_through, last_hash)
        if self._view_key == key and self._view is not None:
            return self._view
        chain = walk_chain(self._refs, last_hash, first_base_offset,
                           lambda r: (r.first_base_offset, r.end_offset))
        if first_base_offset < paged_through and (
            not chain or chain[0].first_base_offset > first_base_offset
        ):
            raise PageMissing(
                f"no page holds the first live record at base offset {first_base_offset}: "
                f"the chain of pages from {last_hash:016x} breaks"
                + (f" before {chain[0].key}" if chain else "")
            )
        view = PageView(chain)
        self._view_key, self._view = key, view
        return view


class ChainedPage(Protocol):
    """What :func:`walk_chain` needs of a page key."""

    @property
    def page_hash(self) -> int: ...

    @property
    def prev_hash(self) -> int: ...


P = TypeVar("P", bound=ChainedPage)


def walk_chain(refs: Iterable[P], last_hash: int, first: int,
               span: Callable[[P], tuple[int, int]]) -> list[P]:
    """The pages a head references, oldest first: the chain of ``prev_hash``
    links walked back from page ``last_hash`` (pages off it are ignored), down
    to the page whose ``span`` ``[start, end)`` holds ``first`` (the rest is
    trimmed)."""
    by_hash: dict[int, list[P]] = {}
    for ref in refs:
        by_hash.setdefault(ref.page_hash, []).append(ref)
    chain: list[P] = []
    wanted = last_hash
    while wanted:
        candidates = [r for r in by_hash.get(wanted, ())
                      if not chain or span(r)[1] <= span(chain[-1])[0]]
        if not candidates:
            break
        # The same bytes under two keys (two predecessors) is as good as
        # impossible; prefer the one whose predecessor is here.
        ref = max(candidates, key=lambda r: r.prev_hash in by_hash)
        if span(ref)[1] <= first:
            break
        chain.append(ref)
        wanted = ref.prev_hash
    chain.reverse()
    return chain


def _order(ref: PageRef) -> tuple[int, str]:
    return ref.first_base_offset, ref.key
