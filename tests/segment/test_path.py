"""Keys are built as docs/design.md says; names that could escape a key are refused."""

from __future__ import annotations

import pytest

from tieredstore.errors import InvalidName
from tieredstore.filetype import FileType
from tieredstore.segment.path import EntryId, SegmentPath, parse_chunk_name


def test_keys_follow_the_documented_layout() -> None:
    path = SegmentPath("c1", "b1", "orders", 3, FileType.COMMIT_LOG, 1024, prefix="ts")
    h = path.file_prefix.split("/")[1]
    assert len(h) == 4 and all(ch in "0123456789abcdef" for ch in h)
    assert path.chunk_key(5120) == (
        f"ts/{h}/c1/b1/orders/3/commitlog/seg-00000000000000001024/chunk-00000000000000005120"
    )
    assert path.merged_key.endswith("/seg-00000000000000001024/segment")
    assert path.chunk_key(5120, 3).endswith("/chunk-00000000000000005120-000003")
    assert parse_chunk_name("chunk-00000000000000005120") == EntryId(5120, 0)
    assert parse_chunk_name("chunk-00000000000000005120-000003") == EntryId(5120, 3)
    for bad in ("chunk-5120", "chunk-00000000000000005120-000000",
                "chunk-00000000000000005120-3", "chunk-00000000000000005120-00000x"):
        assert parse_chunk_name(bad) is None, bad


def test_series_ids_follow_in_listing_order() -> None:
    """Entry after entry, as writers create them, sorts in key order."""
    path = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0)
    entry, ids = EntryId(0), []
    for size in (0, 0, 100, 0, 7, 0, 0, 0, 12):
        ids.append(entry)
        entry = entry.after(size)
    keys = [path.entry_key(e) for e in ids]
    assert sorted(keys) == keys and len(set(keys)) == len(keys)
    assert ids[:4] == [EntryId(0, 0), EntryId(0, 1), EntryId(0, 2), EntryId(100, 0)]


def test_zero_padding_makes_listing_order_numeric() -> None:
    path = SegmentPath("c", "b", "t", 0, FileType.CONSUME_QUEUE, 0)
    keys = [path.chunk_key(p) for p in (9, 10, 100, 2**40)]
    assert sorted(keys) == keys


def test_hash_spreads_queues_of_one_topic() -> None:
    prefixes = {SegmentPath("c", "b", "t", q, FileType.COMMIT_LOG, 0).file_prefix.split("/")[1]
                for q in range(64)}
    assert len(prefixes) > 32


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("topic", "a/b", "'/'"),
        ("topic", "..", "'.' or '..'"),
        ("topic", "", "empty"),
        ("topic", "x\x00y", "control character"),
        ("topic", "x\ny", "control character"),
        ("topic", " padded", "whitespace"),
        ("topic", "t" * 201, "longer than 200"),
        ("cluster", "a\\b", "'/'"),
        ("broker", ".", "'.' or '..'"),
    ],
)
def test_bad_names_are_refused_naming_the_field(field: str, value: str, reason: str) -> None:
    args = {"cluster": "c", "broker": "b", "topic": "t"}
    args[field] = value
    with pytest.raises(InvalidName, match=reason) as info:
        SegmentPath(args["cluster"], args["broker"], args["topic"], 0, FileType.COMMIT_LOG, 0)
    assert info.value.field == field
    assert field in str(info.value)


def test_negative_or_huge_offsets_are_refused() -> None:
    with pytest.raises(InvalidName, match="queue_id"):
        SegmentPath("c", "b", "t", -1, FileType.COMMIT_LOG, 0)
    with pytest.raises(InvalidName, match="base_offset"):
        SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 10**20)


def test_unicode_topic_names_are_allowed() -> None:
    path = SegmentPath("c", "b", "订单-événements", 0, FileType.COMMIT_LOG, 0)
    assert "订单-événements" in path.base_dir
