"""SegmentBuffer against a plain bytearray model: push, head, join, drop, read."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tieredstore.errors import ReadOutOfRange
from tieredstore.segment.pool import SegmentBuffer


class BufferMachine(RuleBasedStateMachine):
    """The model is the bytes ``[start, end)`` as one bytearray."""

    buffer: SegmentBuffer
    model: bytearray
    start: int

    @initialize(start=st.integers(0, 10**12))
    def create(self, start: int) -> None:
        self.buffer = SegmentBuffer(start)
        self.model = bytearray()
        self.start = start

    @rule(data=st.binary(max_size=40))
    def push(self, data: bytes) -> None:
        assert self.buffer.push(data) == self.start + len(self.model)
        self.model += data

    @rule(data=st.data())
    @precondition(lambda self: len(self.model) > 0)
    def head(self, data: st.DataObject) -> None:
        length = data.draw(st.integers(1, len(self.model)))
        body = self.buffer.head(length)
        assert isinstance(body, bytes)
        assert body == self.model[:length]
        # asking again (a retry) gives the same bytes, joined once already
        assert self.buffer.head(length) is body

    @rule(data=st.data())
    @precondition(lambda self: len(self.model) > 0)
    def join(self, data: st.DataObject) -> None:
        """Any range joined ahead (the next chunk, while one uploads) reads the
        same, and a later head or join of it gives the very bytes joined."""
        lo = data.draw(st.integers(0, len(self.model) - 1))
        length = data.draw(st.integers(1, len(self.model) - lo))
        body = self.buffer.join(self.start + lo, length)
        assert isinstance(body, bytes)
        assert body == self.model[lo : lo + length]
        assert self.buffer.join(self.start + lo, length) is body

    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        length = data.draw(st.integers(0, len(self.model)))
        self.buffer.drop(length)
        del self.model[:length]
        self.start += length

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        lo = data.draw(st.integers(0, len(self.model)))
        length = data.draw(st.integers(0, len(self.model) - lo))
        got = self.buffer.read(self.start + lo, length)
        assert got == self.model[lo : lo + length]

    @invariant()
    def bounds(self) -> None:
        assert (self.buffer.start, self.buffer.end) == (self.start, self.start + len(self.model))
        assert self.buffer.size == len(self.model)


BufferMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40,
                                           deadline=None)
TestSegmentBuffer = BufferMachine.TestCase


@given(st.lists(st.binary(min_size=1, max_size=20), min_size=1, max_size=30))
def test_take_all_returns_every_byte_and_empties_the_buffer(pieces: list[bytes]) -> None:
    buffer = SegmentBuffer(5)
    for piece in pieces:
        buffer.push(piece)
    buffer.head(1)
    assert buffer.take_all() == b"".join(pieces)
    assert buffer.size == 0 and buffer.start == buffer.end == 5 + sum(map(len, pieces))


def test_a_read_outside_the_buffered_bytes_is_refused() -> None:
    buffer = SegmentBuffer(100)
    buffer.push(b"abcdef")
    with pytest.raises(ReadOutOfRange, match=r"\[98, 102\) outside the buffered bytes"):
        buffer.read(98, 4)
    with pytest.raises(ReadOutOfRange):
        buffer.read(104, 3)
    assert buffer.read(102, 4) == b"cdef"


def test_a_join_outside_the_buffered_bytes_is_refused() -> None:
    buffer = SegmentBuffer(100)
    buffer.push(b"abcdef")
    for position, length in ((99, 2), (104, 3), (101, 0)):
        with pytest.raises(ValueError, match="join of"):
            buffer.join(position, length)
    assert buffer.join(101, 5) == b"bcdef"
    assert buffer.read(100, 6) == b"abcdef"


def test_a_head_that_ends_inside_a_piece_keeps_the_rest_of_that_piece() -> None:
    buffer = SegmentBuffer(0)
    buffer.push(b"aaaa")
    buffer.push(b"bbbb")
    assert buffer.head(6) == b"aaaabb"
    assert buffer.piece_count == 2
    buffer.drop(6)
    assert buffer.read(6, 2) == b"bb"
    assert buffer.head(2) == b"bb"
