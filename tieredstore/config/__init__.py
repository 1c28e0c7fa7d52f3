"""Configuration: one frozen dataclass, loaded from TOML, environment and code.

Precedence, lowest first: defaults here, the file given (if any),
``TIEREDSTORE_<KEY>`` environment variables, keyword overrides in code. Every
key is validated; a bad value raises :class:`ConfigError` naming the key (and
where it was set) and what it allows, ranges in human units.
``tieredstore.toml`` beside this package (:data:`REFERENCE_FILE`, shipped in
the wheel) documents every key; a test keeps the two in step.

Names (``cluster``, ``broker``, ``key_prefix``) and paths are checked when
the configuration is built, before anything is written. The S3 secret never
shows: not in ``repr``/``str`` of the configuration, nor in any error.

Each setting is declared once. A key that sets a field of a layer's own
options (``RetryPolicy``, ``GovernorOptions``, ``ObjectStoreOptions``,
``S3Settings``, ``SegmentOptions``, ``PoolOptions``, ``FetcherOptions``, ``LogOptions``) names
that field and takes its default; ``config.options(Kind)`` builds a layer's
options from those keys. The layers never read this package.

The package: :mod:`~tieredstore.config.model` (the keys and the checks
across them), :mod:`~tieredstore.config.loading` (file, environment,
overrides), :mod:`~tieredstore.config.knobs` (one key's declaration and
check), :mod:`~tieredstore.config.coerce` (text into a key's type),
:mod:`~tieredstore.config.units` (human units, and the one reader of sizes and
durations: ``parse_size``, ``parse_duration``), :mod:`~tieredstore.config.topics`
(per-topic overrides), :mod:`~tieredstore.config.names` and
:mod:`~tieredstore.config.paths` (names and directories).

Units: sizes are bytes or IEC units (``8MiB``); ``MB``, ``GB``, ``KB`` are refused as
ambiguous. Durations take units (``500ms``, ``72h``, ``7d``, ``1h30m``); a plain
number is seconds, except for keys that delete data when their time runs out
(``file_reserved_time``...), where the file and the environment must give a unit.
"""

from tieredstore.config.coerce import near_miss
from tieredstore.config.crypto import decode_key
from tieredstore.config.loading import load_config
from tieredstore.config.model import FIELDS, YEAR, TieredStoreConfig
from tieredstore.config.paths import check_paths
from tieredstore.config.reference import REFERENCE_FILE
from tieredstore.config.topics import TopicSettings
from tieredstore.config.units import (
    DURATION_HELP,
    SIZE_HELP,
    UnitError,
    human_seconds,
    human_size,
    parse_duration,
    parse_size,
)
from tieredstore.sizes import GiB, KiB, MiB

KEYS = frozenset(FIELDS)
"""Every key's name (the file's keys, ``TIEREDSTORE_<KEY>``, keyword overrides)."""

__all__ = [
    "decode_key",
    "DURATION_HELP",
    "SIZE_HELP",
    "UnitError",
    "YEAR",
    "GiB",
    "KEYS",
    "KiB",
    "MiB",
    "REFERENCE_FILE",
    "TieredStoreConfig",
    "check_paths",
    "human_seconds",
    "human_size",
    "load_config",
    "near_miss",
    "parse_duration",
    "parse_size",
    "TopicSettings",
]
