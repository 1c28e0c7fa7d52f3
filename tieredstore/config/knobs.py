"""A key of the configuration: its declaration (default, range or choices,
unit, the layer options fields it sets) and the check of its value alone;
secrets kept out of every message."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any, NamedTuple

from tieredstore.config.units import human
from tieredstore.errors import ConfigError

# Keys whose values never appear in a repr, a str or an error message.
SECRET_KEYS = frozenset({"s3_secret_access_key", "s3_session_token", "encryption_key"})
REDACTED = "<redacted>"


class Feeds(NamedTuple):
    """Field ``name`` of a layer's options dataclass ``kind``, which a key sets."""

    kind: type
    name: str
    default: Any  # the field's (dataclasses.MISSING if it has none)


class LayerFields:
    """``LayerFields(FetcherOptions).memory_bytes``: that field, as a key's
    default (:func:`knob`); a name the options do not have fails at import."""

    def __init__(self, kind: type) -> None:
        self._kind = kind
        self._fields = {f.name: f for f in dataclasses.fields(kind)}

    def __getattr__(self, name: str) -> Any:
        if name not in self._fields:
            raise AttributeError(f"{self._kind.__name__} has no field {name!r}")
        return Feeds(self._kind, name, self._fields[name].default)


def knob(default: Any, lo: float | None = None, hi: float | None = None,
         choices: tuple[str, ...] | None = None, unit: str = "", *,
         also: tuple[Feeds, ...] = (), needs_unit: bool = False) -> Any:
    """A key's default, its range or choices, its unit ("bytes", "s" or "") and the
    layer options fields it sets (``also``). A default given as a layer's field
    (:class:`LayerFields`) is that field's default, and the key sets that field:
    the layers own their defaults, and ``TieredStoreConfig.options`` sets the fields.

    ``needs_unit``: a duration that deletes data when it runs out (a retention):
    written in the file or the environment, a plain number other than 0 is
    refused (``72`` is hours to a RocketMQ operator); code passes seconds.
    A key typed ``int | None`` or ``float | None`` is off when None (``"off"``
    in the file or the environment)."""
    if isinstance(default, Feeds):
        default, also = default.default, (default, *also)
    return field(default=default, metadata={"lo": lo, "hi": hi, "choices": choices,
                                            "unit": unit, "feeds": also,
                                            "needs_unit": needs_unit})


OFF = "off"  # the text of None, for a key that may be off


def kind_of(f: dataclasses.Field[Any]) -> tuple[str, bool]:
    """A key's type name (``int``, ``float``, ``bool``, ``str``) and whether it may be
    None (off)."""
    kind = str(f.type)
    optional = kind.endswith(" | None")
    return kind.removesuffix(" | None"), optional


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
    name, optional = kind_of(f)
    if optional and value is None:
        return
    kind = {"int": int, "float": float, "bool": bool, "str": str}[name]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        off = f" or {OFF!r}" if optional else ""
        raise ConfigError(f.name, f"must be {kind.__name__}{off}, got "
                                  f"{show_value(f.name, value)}")
    lo, hi, choices = f.metadata["lo"], f.metadata["hi"], f.metadata["choices"]
    unit = f.metadata["unit"]
    if choices is not None and value not in choices:
        raise ConfigError(f.name, f"must be one of {', '.join(choices)}; "
                                  f"got {show_value(f.name, value)}")
    if lo is not None and hi is not None and not lo <= value <= hi:
        allowed = f"[{human(lo, unit)}, {human(hi, unit)}]" + (f" or {OFF!r}" if optional else "")
        if unit == "s" and math.isinf(hi):
            allowed = f"at least {human(lo, unit)} (inf: no limit)"
            raise ConfigError(f.name, f"must be {allowed}, got {show_value(f.name, value, unit)}")
        raise ConfigError(f.name, f"must be in {allowed}, got {show_value(f.name, value, unit)}")
    if isinstance(value, str) and "\x00" in value:
        raise ConfigError(f.name, "must not contain a NUL character")
