"""Where a broker's log objects live: ``{prefix}/{h}/{cluster}/{broker}/log/log-{seq:020d}``.

``h`` is four hex digits of SHA-256 of ``cluster/broker/log``; sequence numbers
are zero-padded to 20 digits, so listing order is sequence order.
"""

from __future__ import annotations

from dataclasses import dataclass

from tieredstore.names import hashed_dir, validate_name, validate_offset, validate_prefix

LOG_NAME = "log-"


@dataclass(frozen=True, slots=True)
class LogPath:
    """The log of one broker of one cluster."""

    cluster: str
    broker: str
    prefix: str = "tieredstore"

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        validate_name("cluster", self.cluster)
        validate_name("broker", self.broker)

    @property
    def directory(self) -> str:
        """The key prefix of every log object of the broker, ending in ``/``."""
        return hashed_dir(self.prefix, f"{self.cluster}/{self.broker}/log")

    def key(self, seq: int) -> str:
        return f"{self.directory}{LOG_NAME}{validate_offset('log sequence', seq):020d}"

    def parse(self, key: str) -> int | None:
        """The sequence number of a log object's key, or None for any other key."""
        if not key.startswith(self.directory):
            return None
        name = key[len(self.directory):]
        digits = name[len(LOG_NAME):]
        if name.startswith(LOG_NAME) and len(digits) == 20 and digits.isdigit():
            return int(digits)
        return None
