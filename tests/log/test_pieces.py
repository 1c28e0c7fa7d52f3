"""The log's pieces by queue: what a queue has is found among many queues'."""

from __future__ import annotations

from tieredstore.filetype import FileType
from tieredstore.log.pieces import LogPieces
from tieredstore.segment.layout import ChunkRef

CL, CQ = FileType.COMMIT_LOG, FileType.CONSUME_QUEUE


def test_each_queues_pieces_segments_and_bases_are_its_own() -> None:
    pieces = LogPieces()
    for q in range(40):
        for file_type in (CQ, CL):
            for base in (4096, 0):
                pieces.found(("t", q, file_type, base),
                             ChunkRef(base, 10 + q, f"log/log-{q:020d}", 7, q))
    pieces.found(("u", 7, CL, 0), ChunkRef(0, 5, "log/log-x"))

    assert pieces.queues() == {("t", q) for q in range(40)} | {("u", 7)}
    assert pieces.bases("t", 7, CL) == [0, 4096]
    assert pieces.bases("t", 7, CQ) == [0, 4096]
    assert pieces.bases("u", 7, CQ) == []
    assert pieces.of_queue("u", 7) == [(CL, 0, ChunkRef(0, 5, "log/log-x"))]
    assert pieces.of_queue("t", 3) == [
        (file_type, base, ChunkRef(base, 13, f"log/log-{3:020d}", 7, 3))
        for file_type, base in sorted((f, b) for f in (CQ, CL) for b in (0, 4096))]
    assert pieces.of_queue("t", 40) == []


def test_of_two_pieces_at_one_position_the_longer_is_kept() -> None:
    pieces = LogPieces()
    pieces.found(("t", 0, CL, 0), ChunkRef(0, 10, "log/log-1"))
    pieces.found(("t", 0, CL, 0), ChunkRef(0, 30, "log/log-2"))  # a consolidated piece
    pieces.found(("t", 0, CL, 0), ChunkRef(0, 10, "log/log-3"))
    assert pieces.of_queue("t", 0) == [(CL, 0, ChunkRef(0, 30, "log/log-2"))]
