"""ObjectStore cases on listing and deleting: pages, prefixes as strings (not
directories), S3's byte order, and batch deletes across more than a page."""

from __future__ import annotations

from tieredstore.objectstore.base import MAX_LIST_PAGE, ObjectStore
from tieredstore.testing._objectstore_base import ObjectStoreSuite, listed_keys, put_all

_LISTED = [f"list/k/{i:05d}" for i in range(1_050)]
# Keys below a key that is itself an object.
_NESTED = ["list/k/00005/child", "list/k/00005/child/deeper"]
# Keys that share the string "list/k" but not the "directory" "list/k/".
_NEIGHBOURS = ["list/k", "list/k-other", "list/k2/x", "list/kk"]
_ELSEWHERE = ["list/j/z", "other"]


class ListingCases(ObjectStoreSuite):
    """Listing keys under a prefix, and deleting many at once."""

    def _in_listing_order(self, keys: list[str]) -> list[str]:
        """What a listing of ``keys`` looks like: sorted by UTF-8 bytes, as S3 does."""
        if self.lists_by_directory:
            # Directory by directory: "list/k/..." (the entries of directory "k")
            # before its sibling "list/k-other". Our keys are fixed-width below
            # each directory, where the two orders agree.
            return sorted(keys, key=lambda k: k.split("/"))
        return sorted(keys)

    async def test_prefixes_naming_impossible_directories_list_nothing(self) -> None:
        async with self.store() as store:
            await store.put("dots/a", b"1")
            prefixes = ["../", "../../", "dots/../", "./", "dots/./", "/"]
            if not self.folds_double_slash:
                prefixes.append("dots//")
            for prefix in prefixes:
                assert await listed_keys(store, prefix) == [], prefix
            assert await listed_keys(store, "dots/") == ["dots/a"]

    async def test_list_pages_and_delete_many_across_more_than_a_page(self) -> None:
        async with self.store() as store:
            await self._list_pages_and_delete_many(store)

    async def _list_pages_and_delete_many(self, store: ObjectStore) -> None:
        await put_all(store, _LISTED + _NEIGHBOURS + _ELSEWHERE)
        # One after the other: SeaweedFS's filer, creating the file "child" and the
        # directory "child/" for "child/deeper" at the same moment, sometimes keeps
        # only one of them (seen once in a CI run). AWS has no directories.
        for key in _NESTED:
            await store.put(key, b"x")

        pages = [page async for page in store.list_pages("list/k/")]
        assert len(pages) >= 2, [len(p) for p in pages]
        assert all(0 < len(page) <= MAX_LIST_PAGE for page in pages), [len(p) for p in pages]
        listed = [o.key for page in pages for o in page]
        expected = sorted(_LISTED + _NESTED)
        assert listed == expected, f"{len(listed)} keys listed, {len(expected)} expected"
        # Nested keys sort bytewise: "00005" < "00005/child" < "00006".
        i = listed.index("list/k/00005")
        assert listed[i : i + 4] == [
            "list/k/00005", "list/k/00005/child", "list/k/00005/child/deeper", "list/k/00006",
        ], listed[i : i + 4]
        assert all(o.size == 1 for page in pages for o in page)

        # A prefix is a string prefix, not a directory: "list/k" takes the neighbours.
        assert await listed_keys(store, "list/k") == self._in_listing_order(
            _LISTED + _NESTED + _NEIGHBOURS
        )
        assert await listed_keys(store, "list/k/0001") == [f"list/k/{i:05d}" for i in range(10, 20)]
        assert await listed_keys(store, "list/k/01049") == ["list/k/01049"]
        assert await listed_keys(store, "list/k2") == ["list/k2/x"]
        assert await listed_keys(store, "list/k2/") == ["list/k2/x"]
        assert await listed_keys(store, "list/kk") == ["list/kk"]
        assert await listed_keys(store, "list/k/00005/") == _NESTED
        assert await listed_keys(store, "list/nothing") == []
        assert await listed_keys(store, "nothing/") == []
        assert [page async for page in store.list_pages("nothing/")] == []
        everything = _LISTED + _NESTED + _NEIGHBOURS + _ELSEWHERE
        assert await listed_keys(store, "") == self._in_listing_order(everything)

        # More keys than one DeleteObjects call takes, with missing keys mixed in.
        await store.delete_many([*_LISTED, "list/k/missing", "list/k/00000/missing"])
        assert await listed_keys(store, "list/k/") == _NESTED
        left = _NESTED + _NEIGHBOURS + _ELSEWHERE
        assert await listed_keys(store, "") == self._in_listing_order(left)
        # Deleting keys that do not exist (any more) is not an error.
        await store.delete_many(_LISTED)
        await store.delete_many(["never/was", "never/was/either"])
        await store.delete_many([])
        await store.delete("never/was")
        await store.delete_many(_NESTED + _NEIGHBOURS + _ELSEWHERE)
        assert await listed_keys(store, "") == []
