"""The naming rules of object keys, one for every layer: names that cannot escape
their key part, numbers of at most 20 digits, and the hashed directory that
spreads keys over S3 request-rate partitions."""

from __future__ import annotations

import hashlib
import unicodedata

from tieredstore.errors import InvalidName

MAX_NAME_BYTES = 200
MAX_OFFSET = 10**20 - 1


def validate_name(field: str, value: str) -> str:
    """Refuse a name that could escape its place in a key; return it unchanged."""
    if not isinstance(value, str):
        raise InvalidName(field, str(value), f"must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidName(field, value, "must not be empty")
    if value in (".", ".."):
        raise InvalidName(field, value, "must not be '.' or '..'")
    if "/" in value or "\\" in value:
        raise InvalidName(field, value, "must not contain '/' or '\\'")
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            raise InvalidName(field, value, f"must not contain control character {ch!r}")
    if value != value.strip():
        raise InvalidName(field, value, "must not start or end with whitespace")
    if len(value.encode()) > MAX_NAME_BYTES:
        raise InvalidName(field, value, f"is longer than {MAX_NAME_BYTES} bytes in UTF-8")
    return value


def validate_prefix(prefix: str) -> str:
    """A key prefix: ``/``-separated names, each valid; may be empty."""
    if prefix:
        for part in prefix.split("/"):
            validate_name("key_prefix", part)
    return prefix


def validate_offset(field: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidName(field, str(value), f"must be an int, got {type(value).__name__}")
    if not 0 <= value <= MAX_OFFSET:
        raise InvalidName(field, str(value), f"must be in [0, {MAX_OFFSET}]")
    return value


def hashed_dir(prefix: str, path: str) -> str:
    """``{prefix}/{h}/{path}/``, ``h`` four hex digits of SHA-256 of ``path``."""
    digest = hashlib.sha256(path.encode()).hexdigest()[:4]
    head = f"{prefix}/" if prefix else ""
    return f"{head}{digest}/{path}/"
