"""Keys, frames, record rules and page choice: pure, no store."""

from __future__ import annotations

import pytest

from tests.metadata.helpers import record
from tieredstore.errors import InvalidName
from tieredstore.metadata import (
    COMMIT_LOG,
    CONSUME_QUEUE,
    INDEX,
    CorruptMetadata,
    PageMissing,
    PageRef,
    QueueHead,
    QueuePath,
    RecordOrderError,
    SegmentRecord,
)
from tieredstore.metadata.format import (
    build_page,
    check_follows,
    check_record,
    decode_head,
    decode_page,
    encode_head,
    encode_page,
)
from tieredstore.metadata.keys import file_type_dir, parse_queue_head_key
from tieredstore.metadata.pages import PageSet, page_span
from tieredstore.segment import FileType, SegmentPath

QUEUE = QueuePath("bucket-root/", "orders", 7)


def test_layout_keeps_heads_and_pages_apart() -> None:
    assert QUEUE.head_key(12) == "bucket-root/meta/heads/orders/7/head-00000000000000000012"
    assert QUEUE.pages_prefix(CONSUME_QUEUE) == "bucket-root/meta/pages/orders/7/consume_queue/"
    assert [file_type_dir(t) for t in (COMMIT_LOG, CONSUME_QUEUE, INDEX)] == [
        "commit_log", "consume_queue", "index"]
    assert QueuePath("", "t", 0).head_key(1) == "meta/heads/t/0/head-00000000000000000001"


def test_keys_parse_back() -> None:
    assert QUEUE.head_version(QUEUE.head_key(99)) == 99
    assert QUEUE.head_version(QUEUE.heads_prefix + "head-12") is None
    assert parse_queue_head_key("bucket-root", QUEUE.head_key(3)) == ("orders", 7)
    assert parse_queue_head_key("bucket-root", "bucket-root/meta/heads/orders/x/head-1") is None
    ref = QUEUE.page_ref(COMMIT_LOG, [record(5), record(6)], 2**64 - 1, 7)
    assert ref == PageRef(ref.key, 500, 700, 50, record(6).end_timestamp_ms, 2, 2**64 - 1, 7)
    assert ref.key.endswith("-ffffffffffffffff-0000000000000007")
    assert QUEUE.parse_page_key(COMMIT_LOG, ref.key) == ref
    assert QUEUE.parse_page_key(CONSUME_QUEUE, ref.key) is None
    keys = [QUEUE.page_ref(COMMIT_LOG, [record(i)], 9 - i % 5, 0).key for i in (9, 10, 100)]
    assert keys == sorted(keys)  # listing order is offset order


@pytest.mark.parametrize("topic", ["", "a/b", "..", "."])
def test_names_that_would_break_a_key_are_refused(topic: str) -> None:
    with pytest.raises(InvalidName):
        QueuePath("r", topic, 0)
    with pytest.raises(InvalidName):
        QueuePath("r", "t", -1)


@pytest.mark.parametrize("topic", [" t", "t ", "a\\b", "a\x00b", "a\nb", "t" * 201])
def test_a_queue_path_refuses_the_topics_a_segment_path_refuses(topic: str) -> None:
    """One naming rule: a topic the segments' keys refuse, the metadata's keys
    refuse too, with the same message."""
    with pytest.raises(InvalidName) as segment:
        SegmentPath("c", "b", topic, 0, FileType.COMMIT_LOG, 0)
    with pytest.raises(InvalidName) as queue:
        QueuePath("r", topic, 0)
    assert str(queue.value) == str(segment.value)


def test_frames_detect_damage() -> None:
    head = QueueHead(format_version=1, version=4, page_size=8)
    data = encode_head(head)
    assert decode_head(data, "k", 4) == head
    with pytest.raises(CorruptMetadata, match="CRC32C"):
        decode_head(data[:-1] + bytes([data[-1] ^ 1]), "k", 4)
    with pytest.raises(CorruptMetadata, match="holds version"):
        decode_head(data, "k", 5)
    with pytest.raises(CorruptMetadata, match="magic"):
        decode_head(encode_page(COMMIT_LOG, [record(0)]), "k", 4)
    ref, page = build_page(QUEUE, COMMIT_LOG, [record(0), record(1)], 0)
    assert page == encode_page(COMMIT_LOG, [record(0), record(1)])
    assert decode_page(page, COMMIT_LOG, ref) == [record(0), record(1)]
    with pytest.raises(CorruptMetadata, match="hash"):
        decode_page(encode_page(COMMIT_LOG, [record(0)]), COMMIT_LOG, ref)
    with pytest.raises(CorruptMetadata, match="file type"):
        decode_page(page, CONSUME_QUEUE, ref)


def test_record_rules() -> None:
    check_record(record(0))
    check_follows(record(0), record(1))
    bad = [
        SegmentRecord(file_type=COMMIT_LOG, size=0, message_count=1),
        SegmentRecord(file_type=0, size=1, message_count=1),
        SegmentRecord(file_type=COMMIT_LOG, size=1, message_count=1, first_message_offset=5,
                      last_message_offset=4),
        SegmentRecord(file_type=COMMIT_LOG, size=1, message_count=1, begin_timestamp_ms=9,
                      end_timestamp_ms=8),
    ]
    for r in bad:
        with pytest.raises(RecordOrderError):
            check_record(r)
    overlapping = record(1)
    overlapping.base_offset -= 1
    with pytest.raises(RecordOrderError, match="overlaps"):
        check_follows(record(0), overlapping)
    with pytest.raises(RecordOrderError, match="message offset"):
        check_follows(record(0), record(1, messages=5))


def chain(*spec: tuple[int, int, int, int]) -> list[PageRef]:
    """Pages (first base, end, first message, max end time), each linked to the one before."""
    out: list[PageRef] = []
    for n, (base, end, msg, ts) in enumerate(spec, start=1):
        out.append(PageRef(f"k{n}", base, end, msg, ts, 1, n, n - 1))
    return out


def test_the_view_is_the_chain_from_the_heads_newest_page() -> None:
    pages = chain((0, 100, 0, 50), (100, 200, 10, 40), (200, 300, 20, 90), (300, 400, 30, 60))
    stray = PageRef("stray", 100, 250, 10, 99, 1, 77, 1)  # same offsets, never referenced
    pageset = PageSet(page_span, [*pages, stray])
    view = pageset.view(first_base_offset=150, paged_through=300, last_hash=3)
    assert [r.key for r in view.refs] == ["k2", "k3"]  # k1 trimmed, k4 not referenced yet
    assert [r.key for r in pageset.dead(150)] == ["k1"]
    assert view.locate_base(150) == 0 and view.locate_base(299) == 1
    assert view.locate_base(300) is None and view.locate_base(99) is None
    assert view.locate_message(25) == 1 and view.locate_message(9) is None
    assert view.start_for_time(41) == 1 and view.start_for_time(40) == 0
    assert view.start_for_time(91) == 2
    full = pageset.view(first_base_offset=0, paged_through=400, last_hash=4)
    assert [r.key for r in full.refs] == ["k1", "k2", "k3", "k4"]


def test_a_chain_that_breaks_before_the_first_live_record_is_reported() -> None:
    pages = chain((0, 100, 0, 50), (100, 200, 10, 40), (200, 300, 20, 90))
    pageset = PageSet(page_span, [pages[0], pages[2]])  # k2 lost
    with pytest.raises(PageMissing, match="breaks"):
        pageset.view(first_base_offset=0, paged_through=300, last_hash=3)
    view = pageset.view(first_base_offset=200, paged_through=300, last_hash=3)  # trimmed: fine
    assert [r.key for r in view.refs] == ["k3"]
