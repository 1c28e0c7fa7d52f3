from tieredstore.errors import PreconditionFailed
from tieredstore.objectstore import ByteRange, ObjectStore
import pytest

async def test_put_get(store: ObjectStore) -> None:
    await store.put("a/b/c", b"hello world", metadata={"crc32c": "7"})
    assert await store.get("a/b/c", ByteRange(6, 5)) == b"world"
    info = await store.head("a/b/c")
    assert info.size == 11 and info.metadata["crc32c"] == "7"
    with pytest.raises(PreconditionFailed):
        await store.put("a/b/c", b"x", if_none_match=True)
    assert [o.key for o in await store.list_all("a/")] == ["a/b/c"]


async def test_get_object_returns_metadata_with_a_range(store: ObjectStore) -> None:
    await store.put("m/k", b"0123456789", metadata={"crc32c": "abc"})
    got = await store.get_object("m/k", ByteRange(2, 3))
    assert got.data == b"234"
    assert got.info.size == 10 and got.info.metadata == {"crc32c": "abc"}
