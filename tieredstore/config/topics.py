"""Per-topic overrides: ``[topics."orders"]`` tables of the configuration file
(or ``topics={"orders": {...}}`` in code) that set a topic's retention, segment
size and chunk size.

A key in a topic's table means what the top-level key means, for that topic
alone, and is read and checked as that key is (units, range); the resolved
topic must pass every check across keys that the configuration does (a chunk
size a multiple of 1 KiB, a segment that fits ``max_message_size``...). Any
other key in a topic's table is an error naming it, with the key it resembles.
The topic's name is checked as a topic name. Code's tables override the file's,
key by key. The store reads a topic's values through
:meth:`TieredStoreConfig.for_topic`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tieredstore.config.coerce import Fields, coerce, near_miss
from tieredstore.config.knobs import check_value
from tieredstore.errors import ConfigError, InvalidName
from tieredstore.names import validate_name

TOPICS = "topics"


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """The keys a topic may override, as they apply to ``topic``; ``overridden``:
    those its table sets."""

    topic: str
    file_reserved_time: float
    commit_log_max_size: int
    chunk_size: int
    overridden: frozenset[str] = frozenset()

    def key(self, name: str) -> str:
        """Where ``name``'s value for this topic is set: ``topics."orders".chunk_size``
        or the top-level key."""
        return topic_key(self.topic, name) if name in self.overridden else name


TOPIC_KEYS = tuple(f.name for f in dataclasses.fields(TopicSettings)
                   if f.name not in ("topic", "overridden"))


@dataclass(frozen=True, slots=True)
class TopicOverrides:
    """One topic's table: ``(key, value)`` pairs of :data:`TOPIC_KEYS`, checked."""

    topic: str
    values: tuple[tuple[str, Any], ...]


def topic_key(topic: str, key: str | None = None) -> str:
    """A topic's table (``topics."orders"``) or a key in it, as TOML writes it."""
    table = f'{TOPICS}."{topic}"'
    return table if key is None else f"{table}.{key}"


def read_topics(table: Any, fields: Fields, where: str, *, written: bool
                ) -> dict[str, dict[str, Any]]:
    """The tables under ``topics`` (from the file, or code), each key read as the
    top-level key is (``written``: typed in the file) and checked alone."""
    if not isinstance(table, Mapping):
        raise ConfigError(TOPICS, f"must be tables of topics ([topics.\"NAME\"] in the file, "
                                  f"a mapping of topic to keys in code), got "
                                  f"{type(table).__name__} ({where})")
    read: dict[str, dict[str, Any]] = {}
    for topic, keys in table.items():
        if not isinstance(topic, str):
            raise ConfigError(TOPICS, f"a topic must be a string, got {type(topic).__name__} "
                                      f"({where})")
        try:
            validate_name("topic", topic)
        except InvalidName as exc:
            raise ConfigError(topic_key(topic), f"{exc} ({where})") from None
        if not isinstance(keys, Mapping):
            raise ConfigError(topic_key(topic), f"must be a table of keys ({', '.join(TOPIC_KEYS)}"
                                                f"), got {type(keys).__name__} ({where})")
        read[topic] = {key: _read_key(topic, key, value, fields, where=where,
                                        written=written)
                       for key, value in keys.items()}
    return read


def _read_key(topic: str, key: Any, value: Any, fields: Fields, *, where: str,
              written: bool) -> Any:
    if not isinstance(key, str) or key not in TOPIC_KEYS:
        name = str(key)
        near = near_miss(TOPIC_KEYS, name)
        if near is not None:
            hint = f"did you mean {near!r}?"
        elif name in fields:
            hint = f"{name} is not set per topic, only at the top level"
        else:
            hint = "unknown key"
        raise ConfigError(topic_key(topic, name), f"{hint}; a topic's table takes "
                                                  f"{', '.join(TOPIC_KEYS)} ({where})")
    try:
        coerced = coerce(fields, key, value, written=written)
        check_value(fields[key], coerced)
    except ConfigError as exc:
        raise ConfigError(topic_key(topic, key), f"{exc.detail} ({where})") from None
    return coerced


def merged(*layers: Mapping[str, Mapping[str, Any]]) -> tuple[TopicOverrides, ...]:
    """The layers' tables, later layers overriding earlier ones key by key; sorted by topic."""
    tables: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for topic, keys in layer.items():
            tables.setdefault(topic, {}).update(keys)
    return tuple(TopicOverrides(topic, tuple(sorted(keys.items())))
                 for topic, keys in sorted(tables.items()) if keys)
