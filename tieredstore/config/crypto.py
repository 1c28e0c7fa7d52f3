"""The record-encryption key as configured: base64 of an AES key, never shown."""

from __future__ import annotations

import base64
import binascii

from tieredstore.errors import ConfigError

KEY_SIZES = (16, 24, 32)  # AES-128, -192, -256


def decode_key(text: str) -> bytes:
    """``encryption_key``'s bytes: base64 of 16, 24 or 32 bytes."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError("encryption_key", "must be base64 (the value is not shown)") from None
    if len(key) not in KEY_SIZES:
        raise ConfigError("encryption_key", f"must decode to 16, 24 or 32 bytes (AES-128, "
                                            f"-192 or -256), got {len(key)} bytes")
    return key
