"""SegmentBuffer: the bytes appended to one segment and not yet committed.

Pure logic, no IO. Appended pieces are kept as they came (no copy per
message); :meth:`SegmentBuffer.head` joins the first ``length`` bytes once, as
one ``bytes`` for one commit, and puts that joined piece in place of the
pieces it came from, so the bytes are held once, never twice. Positions are
segment positions: the buffer covers ``[start, end)``, and ``start`` is the
segment's commit position as far as the buffer knows.
"""

from __future__ import annotations

import bisect

from tieredstore.errors import ReadOutOfRange

BytesLike = bytes | memoryview

# Drop consumed slots from the front of the piece list once this many pile up.
_COMPACT_AT = 64


class SegmentBuffer:
    """Bytes ``[start, end)`` of one segment, as a list of pieces."""

    __slots__ = ("_head", "_offsets", "_pieces", "end", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.end = start
        self._pieces: list[BytesLike] = []
        self._offsets: list[int] = []  # segment position of each piece's first byte
        self._head = 0  # index of the first live piece

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def piece_count(self) -> int:
        return len(self._pieces) - self._head

    def push(self, data: bytes) -> int:
        """Add ``data`` at the end; return the position where it starts."""
        position = self.end
        if data:
            self._pieces.append(data)
            self._offsets.append(position)
            self.end += len(data)
        return position

    def read(self, position: int, length: int, *, segment: str = "") -> bytes:
        """Bytes ``[position, position + length)``, all of them in the buffer."""
        if length < 0 or position < self.start or position + length > self.end:
            raise ReadOutOfRange(
                f"buffered read [{position}, {position + length}) outside the buffered "
                f"bytes [{self.start}, {self.end})",
                segment=segment,
            )
        if length == 0:
            return b""
        stop = position + length
        i = bisect.bisect_right(self._offsets, position, lo=self._head) - 1
        out: list[BytesLike] = []
        while position < stop:
            piece, offset = self._pieces[i], self._offsets[i]
            lo = position - offset
            hi = min(len(piece), stop - offset)
            out.append(piece if lo == 0 and hi == len(piece) else memoryview(piece)[lo:hi])
            position = offset + hi
            i += 1
        if len(out) == 1 and isinstance(out[0], bytes):
            return out[0]
        return b"".join(out)

    def head(self, length: int) -> bytes:
        """The first ``length`` bytes as one ``bytes``, joined once (:meth:`join`)."""
        if not 0 < length <= self.size:
            raise ValueError(f"head of {length} bytes from a buffer of {self.size}")
        return self.join(self.start, length)

    def join(self, position: int, length: int) -> bytes:
        """Bytes ``[position, position + length)`` as one ``bytes``, joined once.

        The joined bytes replace the pieces they came from (a piece cut at
        either end keeps its other part as a view), so a retry of the same
        commit, or a commit of bytes joined ahead of it, reuses them and
        nothing is held twice.
        """
        stop = position + length
        if length <= 0 or position < self.start or stop > self.end:
            raise ValueError(f"join of [{position}, {stop}) from a buffer of "
                             f"[{self.start}, {self.end})")
        i = self._cut(position)
        j = self._cut(stop)
        pieces = self._pieces
        if j == i + 1:
            first = pieces[i]
            if not isinstance(first, bytes):
                first = pieces[i] = bytes(first)
            return first
        body = b"".join(pieces[i:j])
        pieces[i:j] = [body]
        self._offsets[i:j] = [position]
        return body

    def _cut(self, position: int) -> int:
        """Make a piece start at ``position`` (splitting the one holding it into
        two views): its index, or the end of the list at ``end``."""
        if position == self.end:
            return len(self._pieces)
        i = bisect.bisect_right(self._offsets, position, lo=self._head) - 1
        offset = self._offsets[i]
        if offset == position:
            return i
        view = memoryview(self._pieces[i])
        k = position - offset
        self._pieces[i : i + 1] = [view[:k], view[k:]]
        self._offsets.insert(i + 1, position)
        return i + 1

    def drop(self, length: int) -> None:
        """Forget the first ``length`` bytes: they are committed."""
        if not 0 <= length <= self.size:
            raise ValueError(f"drop of {length} bytes from a buffer of {self.size}")
        stop = self.start + length
        h = self._head
        pieces, offsets = self._pieces, self._offsets
        while h < len(pieces) and offsets[h] + len(pieces[h]) <= stop:
            pieces[h] = b""  # let the bytes go now, not at the next compaction
            h += 1
        if h < len(pieces) and offsets[h] < stop:
            pieces[h] = memoryview(pieces[h])[stop - offsets[h] :]
            offsets[h] = stop
        self._head = h
        self.start = stop
        if h == len(pieces):
            pieces.clear()
            offsets.clear()
            self._head = 0
        elif h >= _COMPACT_AT and 2 * h >= len(pieces):
            del pieces[:h]
            del offsets[:h]
            self._head = 0

    def take_all(self) -> bytes:
        """Every buffered byte, joined; the buffer is empty afterwards."""
        data = b"".join(self._pieces[self._head :])
        self.start = self.end
        self._pieces.clear()
        self._offsets.clear()
        self._head = 0
        return data
