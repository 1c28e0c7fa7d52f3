"""RecordCodec: commit-log records compressed (zstd) and encrypted (AES-GCM).

A record's first 32 bytes (size, magic, CRC32C, offset, store time, flags)
stay as they are; the rest (tags, keys, properties, body: the *tail*) is
replaced by a transformed tail (docs/records.md, *Commit-log record*):

    plain_len u32 | plain_crc32c u32 | [key_id u16 length + UTF-8 | nonce 12 B] | payload

``payload`` is the tail compressed (flag 0x1, kept only where it is smaller)
then encrypted (flag 0x2; AES-GCM, the record's fixed fields, lengths and key
id as associated data, so a record moved to another offset fails to open).
A record neither compressed (zstd does not shrink it) nor encrypted stays the
plain record: flags 0 always means the plain layout.
The record's CRC32C covers the stored bytes, ``plain_crc32c`` the tail once
restored: both are checked. Positions, chunks, merges and recovery see
records as bytes and are unchanged.

Keys: ``encryption_key`` (base64 of 16, 24 or 32 bytes) under the id
``encryption_key_id``, or a ``key_provider`` callable that maps a key id to
its key (for keys held elsewhere, and for rotation: each record names the id
it was sealed with). Key material never appears in a repr or an error. A key this store does not
have is :class:`~tieredstore.errors.KeyUnavailable` (the record is not
damaged); the wrong key fails authentication as changed bytes do.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import zstandard
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tieredstore.checksum import crc32c
from tieredstore.config import TieredStoreConfig, decode_key
from tieredstore.config.crypto import KEY_SIZES
from tieredstore.errors import ConfigError, KeyUnavailable
from tieredstore.store.formats.record import (
    FLAG_AES_GCM,
    FLAG_ZSTD,
    HEAD_SIZE,
    TAIL_AT,
    RecordError,
    framed,
)

KeyProvider = Callable[[str], bytes]

_FLAGS = struct.Struct(">I")
_PLAIN = struct.Struct(">II")  # plain_len, plain_crc32c
_U16 = struct.Struct(">H")
NONCE_SIZE = 12
FLAGS_AT = TAIL_AT - _FLAGS.size


SEAL_FRAMING = _PLAIN.size  # plain_len, plain_crc32c: what a compressed record adds at most
CIPHER_FRAMING = _U16.size + NONCE_SIZE + 16  # key id length, nonce, AES-GCM tag


def sealing_framing(config: TieredStoreConfig) -> int:
    """The most bytes sealing adds to a record under ``config`` (a record
    compression does not shrink stays plain; a compressed one grows by at most
    :data:`SEAL_FRAMING`); ``max_message_size`` bounds the stored record."""
    if config.encryption == "aes-gcm":
        return SEAL_FRAMING + CIPHER_FRAMING + len(config.encryption_key_id.encode())
    return SEAL_FRAMING if config.compression == "zstd" else 0


class RecordCodec:
    """Seals records as they are appended and opens them as they are read."""

    def __init__(self, *, compression_level: int | None = None, key_id: str | None = None,
                 key: bytes | None = None, key_provider: KeyProvider | None = None) -> None:
        self._compressor = (None if compression_level is None
                            else zstandard.ZstdCompressor(level=compression_level))
        self._decompressor = zstandard.ZstdDecompressor()
        self.key_id = key_id
        self._key = key
        self._provider = key_provider
        self._ciphers: dict[str, AESGCM] = {}

    @classmethod
    def from_config(cls, config: TieredStoreConfig, key_provider: KeyProvider | None = None,
                    *, strict: bool = True) -> RecordCodec | None:
        """The codec ``config`` asks for (None: records stay plain). A reader that
        has no key (``strict`` False) still gets one: compressed records read, and
        encrypted ones fail naming the key id they need."""
        level = config.compression_level if config.compression == "zstd" else None
        key_id = key = None
        if config.encryption == "aes-gcm":
            key_id = config.encryption_key_id
            if config.encryption_key:
                key = decode_key(config.encryption_key)
            elif key_provider is None and strict:
                raise ConfigError("encryption_key", "is required when encryption = 'aes-gcm' "
                                                    "and no key_provider is given")
        if level is None and key_id is None and key_provider is None and strict:
            return None
        return cls(compression_level=level, key_id=key_id, key=key, key_provider=key_provider)

    def __repr__(self) -> str:
        return (f"RecordCodec(compressed={self._compressor is not None}, "
                f"key_id={self.key_id!r})")

    # --- keys ---------------------------------------------------------------------------

    def _cipher(self, key_id: str) -> AESGCM:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            key = self._key if key_id == self.key_id and self._key is not None else None
            if key is None and self._provider is not None:
                try:
                    key = self._provider(key_id)
                except Exception as exc:
                    raise KeyUnavailable(key_id, f"the key provider failed for key id "
                                                 f"{key_id!r}: {type(exc).__name__}") from None
            if key is None:
                raise KeyUnavailable(key_id, f"no key for key id {key_id!r}: set "
                                             "encryption_key, or give a key_provider that "
                                             "knows it")
            if not isinstance(key, bytes) or len(key) not in KEY_SIZES:
                raise KeyUnavailable(key_id, f"the key for key id {key_id!r} is not 16, 24 "
                                             "or 32 bytes")
            cipher = self._ciphers[key_id] = AESGCM(key)
        return cipher

    # --- writing ------------------------------------------------------------------------

    def seal(self, record: bytes) -> bytes:
        """The stored form of a plain record from ``encode_record``."""
        tail = memoryview(record)[TAIL_AT:]
        flags = 0
        payload: bytes | memoryview = tail
        if self._compressor is not None:
            packed = self._compressor.compress(tail)
            if len(packed) < len(tail):
                payload, flags = packed, FLAG_ZSTD
        if flags == 0 and self.key_id is None:
            return record  # neither compressed nor encrypted: the plain record (flags 0)
        plain = _PLAIN.pack(len(tail), crc32c(tail))
        parts: list[bytes | memoryview] = [record[HEAD_SIZE:FLAGS_AT], b"", plain]
        if self.key_id is not None:
            flags |= FLAG_AES_GCM
            name = self.key_id.encode()
            nonce = os.urandom(NONCE_SIZE)
            fixed = record[HEAD_SIZE:FLAGS_AT] + _FLAGS.pack(flags)
            parts += [_U16.pack(len(name)), name, nonce]
            payload = self._cipher(self.key_id).encrypt(nonce, payload, fixed + plain + name)
        parts[1] = _FLAGS.pack(flags)
        parts.append(payload)
        return framed(parts)

    # --- reading ------------------------------------------------------------------------

    def open(self, view: memoryview, flags: int) -> memoryview:
        """The plain tail of a sealed record (its CRC32C already checked)."""
        try:
            plain_len, plain_crc = _PLAIN.unpack_from(view, TAIL_AT)
            at = TAIL_AT + _PLAIN.size
            payload: bytes | memoryview
            if flags & FLAG_AES_GCM:
                (n,) = _U16.unpack_from(view, at)
                name = view[at + 2:at + 2 + n]
                key_id = str(name, "utf-8")
                nonce = view[at + 2 + n:at + 2 + n + NONCE_SIZE]
                if len(nonce) != NONCE_SIZE:
                    raise RecordError("sealed record is cut short before its nonce")
                aad = b"".join((view[HEAD_SIZE:at], name))  # fixed fields, lengths, key id
                payload = self._cipher(key_id).decrypt(nonce, view[at + 2 + n + NONCE_SIZE:],
                                                       aad)
            else:
                payload = view[at:]
            if flags & FLAG_ZSTD:
                payload = self._decompressor.decompress(payload, max_output_size=plain_len)
        except InvalidTag:
            raise RecordError("record fails authentication: the wrong key, or changed in "
                              "the bucket") from None
        except (struct.error, UnicodeDecodeError, zstandard.ZstdError) as exc:
            raise RecordError(f"sealed record is malformed: {type(exc).__name__}: "
                              f"{exc}") from None
        if len(payload) != plain_len or crc32c(payload) != plain_crc:
            raise RecordError("record's plain bytes fail their CRC32C")
        return memoryview(payload)

