"""Turning a value given as text (the environment, a TOML string) or as an int
(for a float key) into its key's type; an unknown key's near misses.

Units (:mod:`~tieredstore.config.units`): a size key takes bytes or an IEC
unit (``8MiB``; ``MB`` is refused as ambiguous), a duration key a unit
(``500ms``, ``72h``, ``1h30m``) or a plain number of seconds, except a key
that deletes data when its time runs out (``needs_unit``): there a plain
number written in the file or the environment is refused, since ``72`` is
hours to a RocketMQ operator and seconds to a Kafka one. A key that may be
off takes ``"off"``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from tieredstore.config.knobs import OFF, kind_of, show_value
from tieredstore.config.reference import REFERENCE_FILE
from tieredstore.config.units import DURATION_HELP, SIZE_HELP, UnitError, parse_duration, parse_size
from tieredstore.errors import ConfigError

Fields = Mapping[str, dataclasses.Field[Any]]


def near_miss(names: Iterable[str], key: str, *, cutoff: float = 0.8) -> str | None:
    """The known name ``key`` looks most like a misspelling of, if any resembles it
    at least ``cutoff`` (difflib's ratio; 0.6 for a hint where an unknown name is an
    error anyway)."""
    found = difflib.get_close_matches(key, list(names), n=1, cutoff=cutoff)
    return found[0] if found else None


def unknown_key(fields: Fields, key: str) -> ConfigError:
    near = near_miss(fields, key)
    hint = f"did you mean {near!r}?" if near else f"{REFERENCE_FILE} lists every key"
    return ConfigError(key, f"unknown key; {hint}")


def expected(f: dataclasses.Field[Any]) -> str:
    """What a key's value must be, in words (for an error)."""
    kind, optional = kind_of(f)
    unit = f.metadata["unit"]
    if kind == "bool":
        text = "true or false"
    elif unit == "bytes":
        text = f"a whole number of {SIZE_HELP}"
    elif unit == "s":
        text = DURATION_HELP + ("; a plain number is refused (write 72h or 72s)"
                                if f.metadata["needs_unit"] else "; a plain number is seconds")
    else:
        text = {"int": "a whole number", "float": "a number"}.get(kind, kind)
    return text + (f", or {OFF!r}" if optional else "")


def coerce(fields: Fields, key: str, value: Any, *, written: bool = False) -> Any:
    """Turn a string (from the environment, the file) or int (for a float) into the
    key's type. ``written``: the value comes from the file, where a number is what
    a person typed (a plain number for a ``needs_unit`` key is refused)."""
    if not isinstance(key, str):
        raise ConfigError(str(key), "a key must be a string")
    f = fields.get(key)
    if f is None:
        raise unknown_key(fields, key)
    kind, optional = kind_of(f)
    unit = f.metadata["unit"]
    if isinstance(value, str) and kind != "str":
        text = value.strip()
        if optional and text.lower() == OFF:
            return None
        try:
            if kind == "bool":
                if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(text)
                return text.lower() in ("1", "true", "yes", "on")
            if kind == "int":
                return parse_size(text) if unit == "bytes" else int(text.replace("_", ""))
            if unit == "s":
                return parse_duration(text, bare=not f.metadata["needs_unit"])
            return float(text)
        except UnitError as exc:
            raise ConfigError(key, f"{exc}") from None
        except (ValueError, OverflowError):
            what = {"bytes": "a size", "s": "a duration"}.get(unit, kind)
            raise ConfigError(key, f"cannot read {show_value(key, value)} as {what}: must be "
                                   f"{expected(f)}") from None
    if (written and f.metadata["needs_unit"] and isinstance(value, int | float)
            and not isinstance(value, bool) and value != 0):
        raise ConfigError(key, f"{value!r} has no unit: write \"{value:g}h\" or "
                               f"\"{value:g}s\" (a plain number is refused here: "
                               f"{DURATION_HELP})")
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ConfigError(key, f"is too large for a float: an int of "
                                   f"{value.bit_length()} bits") from None
    return value
