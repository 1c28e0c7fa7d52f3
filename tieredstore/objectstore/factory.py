"""Build an ObjectStore from its own options: which backend, where, how hard to try.

The object-store layer knows nothing of the library configuration:
:mod:`tieredstore.store.base.compose` maps ``TieredStoreConfig`` keys onto
:class:`ObjectStoreOptions` (and :class:`RetryPolicy`, :class:`S3Settings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tieredstore.errors import ConfigError
from tieredstore.objectstore.backends.local import LocalObjectStore
from tieredstore.objectstore.backends.memory import MemoryObjectStore
from tieredstore.objectstore.backends.s3 import S3ObjectStore, S3Settings
from tieredstore.objectstore.base import ObjectStore
from tieredstore.objectstore.chokepoint import Chokepoint, RetryPolicy
from tieredstore.objectstore.governor import GovernorOptions
from tieredstore.objectstore.probe import check_conditional_writes

BACKENDS = ("local", "s3", "memory")


@dataclass(frozen=True, slots=True)
class ObjectStoreOptions:
    """Which backend, where, and the retry policy and request governor of its
    chokepoint.

    ``local_path`` and ``local_fsync`` apply to the local backend, ``s3`` (its
    settings, bucket included) and ``create_bucket`` to S3.
    """

    backend: str = "local"
    local_path: str = "./tieredstore-data"
    local_fsync: bool = True
    s3: S3Settings | None = None
    create_bucket: bool = False
    accept_ignored_if_none_match: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    governor: GovernorOptions = field(default_factory=GovernorOptions)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError("backend", f"must be one of {', '.join(BACKENDS)}; "
                                         f"got {self.backend!r}")
        if self.backend == "s3" and (self.s3 is None or not self.s3.bucket):
            raise ConfigError("s3_bucket", "is required when backend = 's3'")
        if self.backend == "local" and not self.local_path:
            raise ConfigError("local_path", "must not be empty (use '.' for the working "
                                            "directory)")


def open_backend(options: ObjectStoreOptions) -> ObjectStore:
    """The backend ``options.backend`` names, with a chokepoint of ``options.retry``
    and ``options.governor``."""
    chokepoint = Chokepoint(options.retry, governor=options.governor)
    if options.backend == "memory":
        return MemoryObjectStore(chokepoint=chokepoint)
    if options.backend == "local":
        return LocalObjectStore(options.local_path, fsync=options.local_fsync,
                                chokepoint=chokepoint)
    assert options.s3 is not None  # __post_init__
    return S3ObjectStore(options.s3, chokepoint=chokepoint)


async def prepare_bucket(store: ObjectStore, *, create: bool, prefix: str = "",
                         accept_ignored_if_none_match: bool = False) -> None:
    """Before a writer uses an S3 bucket: create it if ``create`` asks, else make
    sure it exists (a misspelled bucket is an error naming it, never a new
    bucket); then, once per key ``prefix``, that the server honours
    ``If-None-Match`` (:mod:`.probe`). Other backends need nothing."""
    if not isinstance(store, S3ObjectStore):
        return
    if create:
        await store.create_bucket()
    else:
        await store.check_bucket()
    await check_conditional_writes(store, prefix, store.server,
                                   accept_ignored=accept_ignored_if_none_match)
