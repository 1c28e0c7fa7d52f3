"""One exception hierarchy for the whole library.

Every error the library raises derives from :class:`TieredStoreError`, and where
a built-in type fits too it is a base as well (``ObjectNotFound`` is a
``FileNotFoundError``, ``ConfigError`` a ``ValueError``), so callers may catch
either. Messages name what was wrong: the key, the field, the position.
"""

from __future__ import annotations

import math
from collections.abc import Callable


class TieredStoreError(Exception):
    """Base of every error raised by tieredstore."""


class Fenced(TieredStoreError):
    """Another writer took over what this one wrote (a segment, a queue's
    metadata, the broker's log, a ledger...): it takes no more writes. Every
    ``*Fenced`` error of the library derives from it, after its own layer's base."""


class Corrupt(TieredStoreError):
    """Bytes in the bucket are damaged or do not agree with each other (a failed
    checksum, a gap, a head or page that fails its checks). Every ``Corrupt*``
    error of the library derives from it, after its own layer's base."""


# --- object store -----------------------------------------------------------


class ObjectStoreError(TieredStoreError):
    """An object-store request failed. ``op`` and ``key`` say which."""

    def __init__(self, message: str, *, op: str = "", key: str = "") -> None:
        super().__init__(message)
        self.op = op
        self.key = key


class ObjectNotFound(ObjectStoreError, FileNotFoundError):
    """The object (or multipart upload) does not exist."""


class NoSuchUpload(ObjectNotFound):
    """The multipart upload id is unknown: completed, aborted or never begun."""


class PreconditionFailed(ObjectStoreError):
    """A conditional request lost: ``If-None-Match: *`` found the key taken."""


class InvalidRequest(ObjectStoreError, ValueError):
    """The store refused the request as malformed (bad range, part too small...)."""


class AccessDenied(ObjectStoreError, PermissionError):
    """Credentials were refused or lack the permission."""


class ReadOnly(ObjectStoreError, PermissionError):
    """A write sent to an object store opened for reading only; nothing was sent."""

    def __init__(self, op: str, key: str) -> None:
        super().__init__(f"{op} of {key!r} refused: the object store is open for reading only",
                         op=op, key=key)


class NoSuchBucket(ObjectNotFound):
    """The bucket does not exist (``bucket`` names it)."""

    def __init__(self, message: str, *, op: str = "", key: str = "", bucket: str = "") -> None:
        super().__init__(message, op=op, key=key)
        self.bucket = bucket


class TransientError(ObjectStoreError):
    """A failure worth retrying: throttling, 5xx, timeouts, dropped connections."""


class Throttled(TransientError):
    """The store asked us to slow down (503 SlowDown, 429)."""


class ServerError(TransientError):
    """The store failed on its side (5xx)."""


class RequestTimeout(TransientError, TimeoutError):
    """A request did not finish within its per-call timeout."""


# --- configuration and names ------------------------------------------------


class KeyUnavailable(TieredStoreError, LookupError):
    """A record is encrypted under a key id this store has no key for: the
    configuration (``encryption_key``, ``key_provider``) is missing it, the
    record is not damaged."""

    def __init__(self, key_id: str, message: str) -> None:
        super().__init__(message)
        self.key_id = key_id


class ConfigError(TieredStoreError, ValueError):
    """A configuration value is missing, of the wrong type or out of range."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config {key!r}: {message}")
        self.key = key
        self.detail = message


def check_field(key: str, value: object, lo: float, hi: float = math.inf, *,
                bounds: str = "", unit: str = "", optional: bool = False) -> None:
    """The one bound check of every options class: ``value`` is a number (not a
    bool) in ``[lo, hi]``, or None where the field is ``optional`` (unset);
    else a :class:`ConfigError` naming the config ``key``, the bounds
    (``bounds`` shows them in the key's own terms) and the value. NaN is refused."""
    if (value is None and optional) or (isinstance(value, int | float)
                                        and not isinstance(value, bool) and lo <= value <= hi):
        return
    allowed = bounds or (f"[{lo}, {hi}]" if hi < math.inf else "")
    raise ConfigError(key, f"must be {f'within {allowed}' if allowed else f'>= {lo}'}{unit}, "
                           f"got {value!r}")


def check_offload_before_retention(key: str, value: float | None, limit_key: str,
                                   limit: float | None,
                                   show: Callable[[float], str] = str) -> None:
    """PIP-17's rule for a managed ledger's offload threshold ``value`` and its
    retention ``limit`` (either None: unset): the threshold must be below the
    limit, or retention deletes ledgers before they are offloaded. ``show``
    writes a value in the key's units."""
    if value is not None and limit is not None and value >= limit:
        raise ConfigError(key, f"must be below {limit_key} = {show(limit)}, or retention "
                               f"deletes ledgers before they are offloaded; got {show(value)}")


class InvalidName(TieredStoreError, ValueError):
    """A name would escape its place in an object key."""

    def __init__(self, field: str, value: str, reason: str) -> None:
        super().__init__(f"invalid {field} {value!r}: {reason}")
        self.field = field
        self.value = value


# --- arguments of the API ----------------------------------------------------


class ArgumentError(TieredStoreError):
    """Base of the errors about an argument a caller gave: ``argument`` names it."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument


class InvalidArgument(ArgumentError, ValueError):
    """An argument has the right type but a value the API does not take."""


class InvalidArgumentType(ArgumentError, TypeError):
    """An argument is of a type the API does not take."""


# --- segments ---------------------------------------------------------------


class SegmentError(TieredStoreError):
    """Base for errors about one segment; ``segment`` names it. ``span``, when
    known, is the segment's byte range ``[start, end)`` that cannot be read."""

    def __init__(self, message: str, *, segment: str = "",
                 span: tuple[int, int] | None = None) -> None:
        super().__init__(f"{segment}: {message}" if segment else message)
        self.segment = segment
        self.span = span


class CommitPositionError(SegmentError, ValueError):
    """A commit was not at the commit position. Resume at ``resume_position``."""

    def __init__(self, message: str, *, segment: str, resume_position: int) -> None:
        super().__init__(message, segment=segment)
        self.resume_position = resume_position


class CommitFailed(SegmentError):
    """A commit did not fully land. Bytes before ``resume_position`` are durable."""

    def __init__(self, message: str, *, segment: str, resume_position: int) -> None:
        super().__init__(message, segment=segment)
        self.resume_position = resume_position


class SegmentFenced(SegmentError, Fenced):
    """Another writer owns this segment; it is now read-only for us."""


class SegmentSealed(SegmentError):
    """The segment is sealed (or being sealed) and takes no more commits."""


class SegmentFull(SegmentError):
    """The commit would grow the segment past its maximum size."""


class CorruptSegment(SegmentError, Corrupt):
    """The objects of a segment do not form a valid segment (gap, overlap...)."""


class IntegrityError(SegmentError, Corrupt):
    """Bytes read back do not match their checksum, or are short."""


class ReadOutOfRange(SegmentError, ValueError):
    """A read asked for bytes outside ``[0, commit_position)``."""


class ChunkMissing(SegmentError, FileNotFoundError):
    """A chunk the metadata points to is not in the object store."""


def is_damage(error: BaseException) -> bool:
    """Whether ``error`` says the bucket's bytes are damaged or gone (a failed
    check, a missing chunk), not that a read failed (an outage, a refused or
    closed store: the same read may succeed later)."""
    return isinstance(error, Corrupt | ChunkMissing)


# --- write path -------------------------------------------------------------


class BufferFull(TieredStoreError):
    """The upload buffer pool is at its byte budget; try again or wait."""


class StoreClosed(TieredStoreError):
    """The store or segment was closed."""
