"""ChunkedSegment against a bytes model: random commits, reads, reopens and a seal."""

from __future__ import annotations

import asyncio

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.segment.helpers import seg_path
from tieredstore.errors import ReadOutOfRange, SegmentSealed
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.segment import ChunkedSegment, SegmentOptions


class SegmentModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store = MemoryObjectStore()
        # Tiny chunks and units, so reads and merges span many of them.
        self.options = SegmentOptions(chunk_size=7, unit_target=11)
        self.segment = self.run(ChunkedSegment.open(self.store, seg_path(), options=self.options))
        self.model = bytearray()
        self.sealed = False

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.loop.close()

    @precondition(lambda self: not self.sealed)
    @rule(data=st.binary(max_size=40))
    def commit(self, data: bytes) -> None:
        self.run(self.segment.commit0(len(self.model), data))
        self.model += data

    @precondition(lambda self: self.sealed)
    @rule(data=st.binary(min_size=1, max_size=5))
    def commit_after_seal_is_refused(self, data: bytes) -> None:
        try:
            self.run(self.segment.commit0(len(self.model), data))
        except SegmentSealed:
            return
        raise AssertionError("commit after seal was accepted")

    @rule(start=st.integers(0, 300), length=st.integers(0, 120))
    def read(self, start: int, length: int) -> None:
        if start + length > len(self.model):
            try:
                self.run(self.segment.read0(start, length))
            except ReadOutOfRange:
                return
            raise AssertionError("read past the commit position was accepted")
        assert self.run(self.segment.read0(start, length)) == bytes(
            self.model[start : start + length]
        )

    @rule()
    def reopen(self) -> None:
        self.segment = self.run(ChunkedSegment.open(self.store, seg_path(), options=self.options))

    @rule()
    def seal(self) -> None:
        self.run(self.segment.seal())
        self.sealed = True

    @invariant()
    def commit_position_matches(self) -> None:
        assert self.segment.commit_position == len(self.model)
        assert self.segment.sealed == self.sealed


SegmentModel.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestSegmentModel = SegmentModel.TestCase
