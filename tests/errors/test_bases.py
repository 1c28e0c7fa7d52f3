"""The error bases ``Fenced`` and ``Corrupt``: one ``except`` for any takeover,
one for any damage in the bucket, whichever layer raised it."""

from __future__ import annotations

import contextlib
import functools
import importlib
import pkgutil

import pytest

import tieredstore
from tests.store.conftest import small_config
from tests.store.test_damage import flip
from tieredstore import Corrupt, Fenced, TieredStoreError
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.store import AsyncMessageStore

# Internal to the disk cache (a ValueError it catches itself): never raised to a caller.
INTERNAL = {"tieredstore.fetcher.disk.CorruptEntry"}
# Damage in the bucket whose name does not say "Corrupt".
ALSO_CORRUPT = {"tieredstore.errors.IntegrityError", "tieredstore.ledger.errors.DigestMismatch",
                "tieredstore.metadata.errors.PageMissing"}


@functools.cache
def library_errors() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of tieredstore, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(tieredstore.__path__, "tieredstore."):
        if info.name.endswith(".__main__"):  # runs the command
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and value.__module__ == info.name):
                found[f"{info.name}.{value.__name__}"] = value
    return found


def named(*parts: str) -> dict[str, type[BaseException]]:
    return {name: cls for name, cls in library_errors().items()
            if any(p in cls.__name__ for p in parts) and name not in INTERNAL
            and cls not in (Fenced, Corrupt)}


def test_every_fenced_error_of_the_library_is_a_fenced() -> None:
    fenced = named("Fenced", "Replaced")
    assert len(fenced) >= 7, sorted(fenced)
    assert [n for n, cls in fenced.items() if not issubclass(cls, Fenced)] == []


def test_every_corrupt_error_of_the_library_is_a_corrupt() -> None:
    corrupt = named("Corrupt") | {n: library_errors()[n] for n in ALSO_CORRUPT}
    assert len(corrupt) >= 9, sorted(corrupt)
    assert [n for n, cls in corrupt.items() if not issubclass(cls, Corrupt)] == []


def test_the_bases_are_tieredstore_errors_and_disjoint() -> None:
    assert issubclass(Fenced, TieredStoreError) and issubclass(Corrupt, TieredStoreError)
    both = [n for n, cls in library_errors().items()
            if issubclass(cls, Fenced) and issubclass(cls, Corrupt)]
    assert both == []


def test_each_keeps_its_layer_base_first() -> None:
    """``except SegmentError`` (MetadataError, LedgerError...) catches what it did."""
    for name, cls in named("Fenced", "Replaced", "Corrupt").items():
        first = cls.__mro__[1]
        assert first not in (Fenced, Corrupt) or cls.__bases__ == (first,), name


def body(offset: int) -> bytes:
    return f"{offset:06d}".encode() * 80


async def test_a_store_taken_over_is_caught_as_fenced_on_its_next_flush() -> None:
    bucket = MemoryObjectStore()
    old = await AsyncMessageStore.open(small_config(), store=bucket)
    await old.append("t", 0, body(0))
    await old.flush()
    new = await AsyncMessageStore.open(small_config(), store=bucket)
    with pytest.raises(Fenced):
        await old.append("t", 0, body(1))
        await old.flush()
    with contextlib.suppress(Fenced):
        await old.close()
    assert [m.body for m in await new.get("t", 0, 0)] == [body(0)]
    await new.close()


async def test_a_damaged_chunk_read_is_caught_as_corrupt() -> None:
    bucket = MemoryObjectStore()
    store = await AsyncMessageStore.open(small_config(write_mode="direct"), store=bucket)
    for i in range(40):
        await store.append("t", 0, body(i))
    await store.close()
    chunks = sorted(o.key for o in await bucket.list_all("")
                    if "/commitlog/" in o.key and "/chunk-" in o.key and o.size > 100)
    await flip(bucket, chunks[0], 10)
    store = await AsyncMessageStore.open(small_config(), store=bucket)
    with pytest.raises(Corrupt, match="CRC32C"):
        await store.get("t", 0, 0, max_count=40)
    await store.close()
