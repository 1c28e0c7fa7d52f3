"""Errors of the queue metadata store, rooted in :class:`TieredStoreError`."""

from __future__ import annotations

from tieredstore.errors import Corrupt, Fenced, TieredStoreError


class MetadataError(TieredStoreError):
    """Base for errors about one queue's metadata; ``queue`` names it."""

    def __init__(self, message: str, *, queue: str = "") -> None:
        super().__init__(f"{queue}: {message}" if queue else message)
        self.queue = queue


class MetadataFenced(MetadataError, Fenced):
    """Another writer wrote a newer head: this instance lost the compare-and-swap
    and refuses every further write. Reopen to continue (as the new owner's reader)."""


class MetadataReadOnly(MetadataError, PermissionError):
    """A write was asked of a read-only open."""


class MetadataNotFound(MetadataError, FileNotFoundError):
    """A read-only open found no head for the queue."""


class CorruptMetadata(MetadataError, Corrupt):
    """A head or page fails its checks: magic, CRC32C, format version, or it does
    not agree with its key or with the records around it."""


class PageMissing(CorruptMetadata, FileNotFoundError):
    """A page the head references is not in the object store. For a read-only
    snapshot this can mean the queue was trimmed since: ``refresh()`` and retry."""


class RecordOrderError(MetadataError, ValueError):
    """An appended record overlaps or precedes the last one, or is malformed."""


class MetadataTooLarge(MetadataError, ValueError):
    """A change would make the head larger than its bound (properties)."""
