"""Where the message store keeps things: the one definition its readers share
(the store itself, the CLI's read-only views, the Spark source)."""

from __future__ import annotations

from tieredstore.config import TieredStoreConfig
from tieredstore.log import LogPath
from tieredstore.segment import FileType, SegmentPath
from tieredstore.segment.path import parse_segment_dir


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


def parse_segment_key(config: TieredStoreConfig, key: str
                      ) -> tuple[str, int, FileType, int] | None:
    """``(topic, queue_id, file_type, base)`` of an object key inside a segment of
    this store's cluster and broker, or None for any other key."""
    head = f"{config.key_prefix}/" if config.key_prefix else ""
    if not key.startswith(head):
        return None
    parts = key[len(head):].split("/")
    if len(parts) != 8 or parts[1] != config.cluster or parts[2] != config.broker:
        return None
    _, _, _, topic, queue, file_type, directory, _ = parts
    base = parse_segment_dir(directory)
    types = {t.label: t for t in FileType}
    if base is None or not queue.isdigit() or file_type not in types:
        return None
    path = segment_path(config, topic, int(queue), types[file_type], base)
    if not key.startswith(path.base_dir):  # the hash part must match too
        return None
    return topic, int(queue), types[file_type], base
