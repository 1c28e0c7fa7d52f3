"""When to offload and when to trim: the automatic triggers. Pure: no IO.

Offload triggers (PIP-17, Pulsar's ``offloadThresholdInBytes`` and
``offloadThresholdInSeconds``):

- by size: walking from the newest ledger (the open one included) to the
  oldest, summing sizes; once the sum passes the threshold, that ledger and
  every older one is offloaded, so about ``threshold`` bytes stay local;
- by age: every ledger closed at least ``threshold`` seconds ago.

Either gives a boundary ledger id: :meth:`ManagedLedger.offload_prefix` of
``(boundary, 0)`` offloads the sealed ledgers before it.

Retention: the oldest ledger is trimmed while the ledgers left after it would
still hold at least ``retention_bytes``, or it was closed more than
``retention_seconds`` ago (Pulsar trims on either).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LedgerSummary:
    """What the triggers look at of one sealed ledger."""

    ledger_id: int
    size: int
    timestamp_ms: int
    offloaded: bool


def offload_boundary(
    sealed: Sequence[LedgerSummary],
    *,
    open_size: int,
    now_ms: int,
    threshold_bytes: int | None,
    threshold_seconds: float | None,
) -> int | None:
    """The ledger id before which everything sealed should be offloaded, or
    None when that would offload nothing new. ``sealed`` ascends by id."""
    boundary: int | None = None
    if threshold_bytes is not None:
        total = open_size
        for ledger in reversed(sealed):
            total += ledger.size
            if total > threshold_bytes:
                boundary = ledger.ledger_id + 1
                break
    if threshold_seconds is not None:
        cutoff = now_ms - threshold_seconds * 1000
        for ledger in reversed(sealed):
            if ledger.timestamp_ms <= cutoff:
                boundary = max(boundary or 0, ledger.ledger_id + 1)
                break
    if boundary is None:
        return None
    if any(not s.offloaded for s in sealed if s.ledger_id < boundary):
        return boundary
    return None


def retention_trims(
    *,
    size: int,
    timestamp_ms: int,
    remaining_bytes: int,
    now_ms: int,
    retention_bytes: int | None,
    retention_seconds: float | None,
) -> bool:
    """Whether the oldest ledger (``size``, closed at ``timestamp_ms``) goes,
    with ``remaining_bytes`` held by it and every newer ledger."""
    over = retention_bytes is not None and remaining_bytes - size >= retention_bytes
    expired = retention_seconds is not None and now_ms - timestamp_ms > retention_seconds * 1000
    return over or expired
