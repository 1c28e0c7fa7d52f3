"""ManagedLedgerConfig: rollover, offload triggers, retention, deletion lag, reads.

Values are checked when the config is made; a bad one raises
:class:`~tieredstore.errors.ConfigError` naming the key. As PIP-17 says, an
offload threshold must lie below the matching retention limit, or ledgers
would be deleted before they are offloaded: such a config is refused.
``None`` means off (no trigger) or unlimited (no retention limit).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tieredstore.errors import ConfigError, check_field, check_offload_before_retention

HOUR = 3600.0


class ReadPriority(enum.Enum):
    """Where reads of a ledger that is both local and offloaded go (Pulsar's
    ``managedLedgerOffloadedReadPriority``)."""

    TIERED_STORAGE_FIRST = "tiered-storage-first"
    BOOKKEEPER_FIRST = "bookkeeper-first"


@dataclass(frozen=True, slots=True)
class ManagedLedgerConfig:
    """How a managed ledger rolls, offloads, keeps and reads its ledgers.

    - ``max_entries_per_ledger``, ``max_ledger_bytes``: roll over to a new
      ledger when the current one reaches either.
    - ``offload_threshold_bytes``: offload the oldest sealed ledgers once the
      ledgers newer than them hold more than this many bytes (0: offload
      every sealed ledger).
    - ``offload_threshold_seconds``: offload ledgers sealed this long ago.
    - ``retention_bytes``, ``retention_seconds``: trim the oldest ledgers
      past these (by :meth:`ManagedLedger.apply_retention`).
    - ``deletion_lag_seconds``: keep the local copy this long after an
      offload completes (4 hours, as Pulsar).
    - ``heartbeat_interval_seconds``: how often the owner refreshes its liveness
      record (docs/writers.md, Liveness records; 0: written at open and close only).
    - ``sweep_interval_seconds``: how often the open managed ledger deletes,
      in the background, the local copies whose deletion lag has passed
      (``delete_offloaded_local_copies``; 0: only when called).
    - ``read_priority``: ``tiered-storage-first`` or ``bookkeeper-first``.
    - ``auto_offload``: check the triggers after every rollover.
    - ``page_size``: ledger records per metadata page (new managed ledgers).
    """

    max_entries_per_ledger: int = 50_000
    max_ledger_bytes: int | None = 2 * 1024**3
    offload_threshold_bytes: int | None = None
    offload_threshold_seconds: float | None = None
    retention_bytes: int | None = None
    retention_seconds: float | None = None
    deletion_lag_seconds: float = 4 * HOUR
    sweep_interval_seconds: float = 600.0
    heartbeat_interval_seconds: float = 30.0
    read_priority: ReadPriority = ReadPriority.TIERED_STORAGE_FIRST
    auto_offload: bool = True
    page_size: int = 64
    ensemble_size: int = 1
    write_quorum_size: int = 1
    ack_quorum_size: int = 1
    offload_extra_metadata: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.read_priority, str):
            try:
                object.__setattr__(self, "read_priority", ReadPriority(self.read_priority))
            except ValueError:
                raise ConfigError(
                    "read_priority",
                    f"must be one of {[p.value for p in ReadPriority]}, "
                    f"got {self.read_priority!r}",
                ) from None
        for key in ("max_entries_per_ledger", "max_ledger_bytes", "page_size"):
            check_field(key, getattr(self, key), 1, optional=key == "max_ledger_bytes")
        for key in ("offload_threshold_bytes", "offload_threshold_seconds", "retention_bytes",
                    "retention_seconds", "deletion_lag_seconds", "sweep_interval_seconds",
                    "heartbeat_interval_seconds"):
            check_field(key, getattr(self, key), 0, optional=not key.endswith(("lag_seconds",
                                                                               "interval_seconds")))
        check_field("ack_quorum_size", self.ack_quorum_size, 1, self.write_quorum_size,
                    bounds=f"[1, write_quorum_size={self.write_quorum_size}]")
        check_field("write_quorum_size", self.write_quorum_size, 1, self.ensemble_size,
                    bounds=f"[1, ensemble_size={self.ensemble_size}]")
        check_offload_before_retention("offload_threshold_bytes", self.offload_threshold_bytes,
                                       "retention_bytes", self.retention_bytes)
        check_offload_before_retention("offload_threshold_seconds",
                                       self.offload_threshold_seconds, "retention_seconds",
                                       self.retention_seconds)

    @property
    def offload_triggers(self) -> bool:
        """Whether a size or age trigger is set."""
        return self.offload_threshold_bytes is not None or \
            self.offload_threshold_seconds is not None

