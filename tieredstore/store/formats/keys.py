"""Where the message store keeps things: the one definition its readers share
(the store itself, the CLI's read-only views, the Spark source)."""

from __future__ import annotations

from tieredstore.config import TieredStoreConfig
from tieredstore.log import LogPath
from tieredstore.segment import FileType, SegmentPath


def metadata_root(config: TieredStoreConfig) -> str:
    """The prefix of the broker's queue metadata (heads and pages)."""
    parts = (config.key_prefix, "meta-root", config.cluster, config.broker)
    return "/".join(p for p in parts if p)


def log_path(config: TieredStoreConfig) -> LogPath:
    """Where the broker's log objects live (write mode log)."""
    return LogPath(config.cluster, config.broker, prefix=config.key_prefix)


def segment_path(config: TieredStoreConfig, topic: str, queue_id: int, file_type: FileType,
                 base: int = 0) -> SegmentPath:
    """The key path of one segment of a queue's flat file."""
    return SegmentPath(config.cluster, config.broker, topic, queue_id, file_type, base,
                       prefix=config.key_prefix)
