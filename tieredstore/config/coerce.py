"""Turning a value given as text (the environment, a TOML string) or as an int
(for a float key) into its key's type; an unknown key's near misses."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from tieredstore.config.knobs import show_value
from tieredstore.config.units import parse_size
from tieredstore.errors import ConfigError

Fields = Mapping[str, dataclasses.Field[Any]]


def near_miss(fields: Fields, key: str) -> str | None:
    """The known key ``key`` looks like a misspelling of, if any."""
    found = difflib.get_close_matches(key, fields, n=1, cutoff=0.8)
    return found[0] if found else None


def unknown_key(fields: Fields, key: str) -> ConfigError:
    near = near_miss(fields, key)
    hint = f"did you mean {near!r}?" if near else "conf/tieredstore.toml lists every key"
    return ConfigError(key, f"unknown key; {hint}")


def coerce(fields: Fields, key: str, value: Any) -> Any:
    """Turn a string (from the environment) or int (for a float) into the key's type."""
    if not isinstance(key, str):
        raise ConfigError(str(key), "a key must be a string")
    f = fields.get(key)
    if f is None:
        raise unknown_key(fields, key)
    kind = str(f.type)
    if isinstance(value, str) and kind != "str":
        text = value.strip()
        try:
            if kind == "bool":
                if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(text)
                return text.lower() in ("1", "true", "yes", "on")
            if kind == "int":
                return parse_size(text)
            return float(text)
        except (ValueError, OverflowError):
            allowed = {"bool": "true or false", "int": "a whole number"
                       + (" of bytes, with an optional suffix (4MiB, 64k)"
                          if f.metadata["unit"] == "bytes" else ""),
                       "float": "a number" + (" of seconds" if f.metadata["unit"] == "s"
                                              else "")}[kind]
            raise ConfigError(key, f"cannot read {show_value(key, value)} as {kind}: must be "
                                   f"{allowed}") from None
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ConfigError(key, f"is too large for a float: an int of "
                                   f"{value.bit_length()} bits") from None
    return value
