"""The user metadata an offload puts on its objects, within S3's rules. Pure.

PIP-17's ``extraMetadata`` (the managed ledger's name, the software version...)
is for people inspecting the bucket; Pulsar never reads it back. Pulsar adds
the format version under ``s3managedledgeroffloaderformatversion`` (its
``METADATA_FORMAT_VERSION_KEY``, lowercased as jclouds normalizes every key)
and checks it when it opens an offloaded ledger; so do we.

S3 limits user metadata to 2 KB: the UTF-8 bytes of every key and value,
summed. Keys travel as ``x-amz-meta-{key}`` headers and come back lowercased,
so keys are lowercased here (two that collide are refused) and must be
header tokens; values must be printable ASCII, which S3 returns as sent.
Anything else is :class:`~tieredstore.ledger.errors.OffloadMetadataTooLarge`
naming the key, before any object is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from tieredstore.ledger.errors import OffloadError, OffloadMetadataTooLarge

FORMAT_VERSION_KEY: Final = "s3managedledgeroffloaderformatversion"
FORMAT_VERSION: Final = "1"
S3_USER_METADATA_LIMIT: Final = 2048
"""Bytes of user metadata (keys and values, UTF-8) S3 accepts on one object."""

_TOKEN = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+")
_PRINTABLE = re.compile(r"[\x20-\x7e]*")


def metadata_size(metadata: Mapping[str, str]) -> int:
    """S3's measure: UTF-8 bytes of every key and value."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in metadata.items())


def build_user_metadata(
    extra: Mapping[str, str] | None,
    own: Mapping[str, str],
    *,
    reserved: int = 0,
    ledger_id: int | None = None,
) -> dict[str, str]:
    """``extra`` (keys lowercased) plus our ``own`` keys and the format version.

    ``reserved`` bytes are kept free for metadata the engine adds (the merged
    segment's ``tieredstore-format``). Our own keys win over extra ones of the
    same name: they are what a reader checks.
    """
    out: dict[str, str] = {}
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise OffloadMetadataTooLarge(
                f"extra metadata must map str to str, got {key!r}: {value!r}",
                ledger_id=ledger_id,
            )
        lower = key.lower()
        if not _TOKEN.fullmatch(lower):
            raise OffloadMetadataTooLarge(
                f"extra metadata key {key!r} is not an HTTP header token", ledger_id=ledger_id
            )
        if lower in out:
            raise OffloadMetadataTooLarge(
                f"extra metadata keys collide once lowercased (as S3 returns them): {key!r}",
                ledger_id=ledger_id,
            )
        if not _PRINTABLE.fullmatch(value):
            raise OffloadMetadataTooLarge(
                f"extra metadata value of {key!r} is not printable ASCII: {value!r:.60}",
                ledger_id=ledger_id,
            )
        out[lower] = value
    out.update(own)
    out[FORMAT_VERSION_KEY] = FORMAT_VERSION
    size = metadata_size(out) + reserved
    if size > S3_USER_METADATA_LIMIT:
        raise OffloadMetadataTooLarge(
            f"object user metadata would be {size} bytes (keys and values, UTF-8; "
            f"{size - metadata_size(extra or {})} of them ours), more than S3's limit of "
            f"{S3_USER_METADATA_LIMIT}",
            ledger_id=ledger_id,
        )
    return out


def check_format_version(metadata: Mapping[str, str], key: str, *, ledger_id: int) -> None:
    """Refuse an object without our format version (Pulsar's ``VERSION_CHECK``)."""
    version = metadata.get(FORMAT_VERSION_KEY)
    if version != FORMAT_VERSION:
        raise OffloadError(
            f"object {key!r} has format version {version!r}, expected {FORMAT_VERSION!r}",
            ledger_id=ledger_id,
        )
