"""LogOptions: how the log mode batches, compacts and deletes (checked when built)."""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore.errors import check_field
from tieredstore.sizes import GiB, KiB, MiB


@dataclass(frozen=True, slots=True)
class LogOptions:
    """``object_size``: a group commit's log object holds at most about this many
    bytes (one put is never split). ``compact_age``: seconds after which the
    pieces of a log object move into chunks of their segments.
    ``delete_age``: seconds a log object whose pieces all moved stays before it
    is deleted (the store's ``gc_safety_age``: see docs/log-objects.md, "Deletion").
    ``linger``: seconds a group commit waits for the other segments' commits
    made due with it. ``consolidate_interval``: seconds after which the small
    log objects written since the last consolidation are rewritten as one (0:
    at every group commit), or sooner once they hold ``consolidate_bytes``;
    ``compact_bytes``: log bytes one compaction group reads at a time.
    ``hold_bytes``: bytes of log pieces kept in memory until they move into
    chunks or are consolidated (:class:`~tieredstore.log.hold.LogHold`)."""

    object_size: int = 8 * MiB
    compact_age: float = 3600.0
    delete_age: float = 3600.0
    linger: float = 0.002
    consolidate_interval: float = 60.0
    consolidate_bytes: int = 64 * MiB
    compact_bytes: int = 64 * MiB
    hold_bytes: int = 256 * MiB

    def __post_init__(self) -> None:
        for key, size in (("log_object_size", self.object_size),
                          ("log_consolidate_bytes", self.consolidate_bytes),
                          ("log_compact_bytes", self.compact_bytes)):
            check_field(key, size, 1 * KiB, 5 * GiB, bounds="[1 KiB, 5 GiB]")
        check_field("log_hold_bytes", self.hold_bytes, 0, 1024 * GiB, bounds="[0, 1 TiB]")
        for key, seconds in (("log_compact_age", self.compact_age),
                             ("gc_safety_age", self.delete_age), ("linger", self.linger),
                             ("log_consolidate_interval", self.consolidate_interval)):
            check_field(key, seconds, 0, unit=" seconds")

    @property
    def check_every(self) -> float:
        """Seconds between two passes of compaction by age and deletion."""
        return max(0.05, min(60.0, self.compact_age / 10, self.delete_age / 10,
                             self.consolidate_interval / 4))
