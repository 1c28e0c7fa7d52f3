"""A key of the configuration: its declaration (default, range or choices,
unit) and the check of its value alone; secrets kept out of every message."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any

from tieredstore.config.units import human
from tieredstore.errors import ConfigError

# Keys whose values never appear in a repr, a str or an error message.
SECRET_KEYS = frozenset({"s3_secret_access_key", "encryption_key"})
REDACTED = "<redacted>"


def knob(default: Any, lo: float | None = None, hi: float | None = None,
         choices: tuple[str, ...] | None = None, unit: str = "") -> Any:
    """A key's default, its range or choices, and its unit ("bytes", "s" or "")."""
    return field(default=default,
                 metadata={"lo": lo, "hi": hi, "choices": choices, "unit": unit})


def size_knob(default: int, lo: int, hi: int) -> Any:
    return knob(default, lo, hi, unit="bytes")


def seconds_knob(default: float, lo: float, hi: float) -> Any:
    return knob(default, lo, hi, unit="s")


def repr_value(key: str, value: Any) -> str:
    if key in SECRET_KEYS and value:
        return repr(REDACTED)
    return repr(value)


def show_value(key: str, value: Any, unit: str = "") -> str:
    """A value for an error message: never a secret's; long ones cut short."""
    if key in SECRET_KEYS:
        return f"{type(value).__name__} (value not shown)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an int of {value.bit_length()} bits"
    if unit and isinstance(value, int | float) and not isinstance(value, bool):
        return human(value, unit)
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}... ({len(text)} characters)"


def check_value(f: dataclasses.Field[Any], value: Any) -> None:
    kind = f.type if isinstance(f.type, type) else {"int": int, "float": float, "bool": bool,
                                                     "str": str}[str(f.type)]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        raise ConfigError(f.name, f"must be {kind.__name__}, got {show_value(f.name, value)}")
    lo, hi, choices = f.metadata["lo"], f.metadata["hi"], f.metadata["choices"]
    unit = f.metadata["unit"]
    if choices is not None and value not in choices:
        raise ConfigError(f.name, f"must be one of {', '.join(choices)}; "
                                  f"got {show_value(f.name, value)}")
    if lo is not None and hi is not None and not lo <= value <= hi:
        allowed = f"[{human(lo, unit)}, {human(hi, unit)}]"
        if unit == "s" and math.isinf(hi):
            allowed = f"at least {human(lo, unit)} (inf: no limit)"
            raise ConfigError(f.name, f"must be {allowed}, got {show_value(f.name, value, unit)}")
        raise ConfigError(f.name, f"must be in {allowed}, got {show_value(f.name, value, unit)}")
    if isinstance(value, str) and "\x00" in value:
        raise ConfigError(f.name, "must not contain a NUL character")
