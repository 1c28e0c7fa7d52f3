"""Choosing pages from their keys. No IO.

A :class:`PageSet` holds every page key listed for one series of pages (a
file type of a queue, a managed ledger). Against a head it splits into the
pages wholly behind the ``first`` pointer (to delete) and the chain of live
pages the head references (a queue's: a :class:`PageView`), walked back
along ``prev_hash`` links from the head's newest page.
Pages off the chain (left by a write whose head never landed) are ignored.
Lookups bisect the view by base offset, message offset or time.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar

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


class ChainedPage(Protocol):
    """What a :class:`PageSet` needs of a page key."""

    @property
    def key(self) -> str: ...

    @property
    def page_hash(self) -> int: ...

    @property
    def prev_hash(self) -> int: ...


P = TypeVar("P", bound=ChainedPage)


def page_span(ref: PageRef) -> tuple[int, int]:
    """The base offsets ``[start, end)`` a queue page covers."""
    return ref.first_base_offset, ref.end_offset


class PageSet(Generic[P]):
    """Every page key listed for one series of pages (a queue's file type, a
    managed ledger), sorted by where they start: ``span`` says what ``[start,
    end)`` each covers (base offsets, ledger ids)."""

    def __init__(self, span: Callable[[P], tuple[int, int]], refs: Iterable[P] = ()) -> None:
        self._span = span
        self._refs = sorted(refs, key=self._order)
        self._keys = {r.key for r in self._refs}
        self._view_key: tuple[int, int, int] | None = None
        self._view: PageView | None = None

    def _order(self, ref: P) -> tuple[int, str]:
        return self._span(ref)[0], ref.key

    def __len__(self) -> int:
        return len(self._refs)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    @property
    def refs(self) -> tuple[P, ...]:
        return tuple(self._refs)

    def add(self, ref: P) -> None:
        if ref.key not in self._keys:
            bisect.insort(self._refs, ref, key=self._order)
            self._keys.add(ref.key)
            self._view_key = self._view = None

    def discard(self, keys: Iterable[str]) -> None:
        gone = set(keys) & self._keys
        if gone:
            self._refs = [r for r in self._refs if r.key not in gone]
            self._keys -= gone
            self._view_key = self._view = None

    def dead(self, first: int) -> list[P]:
        """Pages whose records all lie before ``first``.

        On the chain or off it, such a page is never read again, and deleting
        it is safe even for a writer that is behind without knowing: ``first``
        only moves forward, and a page is only ever written with a live record.
        """
        return [r for r in self._refs if self._span(r)[1] <= first]

    def chain(self, last_hash: int, first: int) -> list[P]:
        """The pages a head references, oldest first: the chain of ``prev_hash``
        links walked back from page ``last_hash`` (pages off it are ignored),
        down to the page that holds ``first`` (the rest is trimmed)."""
        span = self._span
        by_hash: dict[int, list[P]] = {}
        for ref in self._refs:
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

    def view(self: PageSet[PageRef], first_base_offset: int, paged_through: int,
             last_hash: int) -> PageView:
        """The live pages of the chain that ends at page ``last_hash``.

        ``PageMissing`` when the chain breaks before it reaches the page that
        holds the first live record (a page was deleted under a stale head, or
        lost).
        """
        key = (first_base_offset, paged_through, last_hash)
        if self._view_key == key and self._view is not None:
            return self._view
        chain = self.chain(last_hash, first_base_offset)
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
