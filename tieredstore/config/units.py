"""Human units both ways: sizes and durations as messages show them, and sizes
as the environment and TOML strings give them (``4MiB``, ``64k``)."""

from __future__ import annotations

import math

from tieredstore.sizes import GiB, KiB, MiB

_BYTE_UNITS = (("TiB", 1024**4), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB))
_SECOND_UNITS = (("d", 86400.0), ("h", 3600.0), ("min", 60.0))


def human_size(n: int, *, exact: bool = True) -> str:
    """``4 MiB``, ``1536 B``: the largest unit the value is a whole number of. Else
    bytes with an approximation from 10 KiB on (``12345678 B (11.8 MiB)``); not
    ``exact`` (a table's sizes), the approximation alone from 1 KiB on (``1.5 KiB``)."""
    for name, factor in _BYTE_UNITS:
        if n >= factor and n % factor == 0:
            return f"{n // factor} {name}"
    if n >= (10 * KiB if exact else KiB):
        name, factor = next((u, f) for u, f in _BYTE_UNITS if n >= f)
        rough = f"{n / factor:.1f} {name}"
        return f"{n} B ({rough})" if exact else rough
    return f"{n} B"


def human_seconds(s: float) -> str:
    """``1 h``, ``72 h``, ``36500 d``, ``1 ms``, ``0.5 s``; ``no limit`` for infinity."""
    if math.isinf(s):
        return "no limit" if s > 0 else "-inf"
    if math.isnan(s):
        return "nan"
    if s == 0:
        return "0 s"
    if abs(s) < 1:
        return f"{s * 1000:g} ms"
    for name, factor in _SECOND_UNITS:
        if abs(s) >= factor and s % factor == 0:
            return f"{s / factor:.0f} {name}"
    return f"{s:.0f} s" if s == int(s) else f"{s:g} s"


def human(value: float, unit: str) -> str:
    if unit == "bytes" and isinstance(value, int):
        return human_size(value)
    if unit == "s":
        return human_seconds(float(value))
    if isinstance(value, int):
        return str(value)
    return f"{value:g}"


_SIZE_SUFFIXES = {"k": KiB, "kib": KiB, "kb": KiB, "m": MiB, "mib": MiB, "mb": MiB,
                  "g": GiB, "gib": GiB, "gb": GiB, "t": 1024 * GiB, "tib": 1024 * GiB,
                  "tb": 1024 * GiB, "b": 1}


def parse_size(text: str) -> int:
    """``4194304``, ``4MiB``, ``4m``, ``1.5KiB``, ``1_000``: a whole number of bytes."""
    lowered = text.lower().replace("_", "").strip()
    for suffix, factor in sorted(_SIZE_SUFFIXES.items(), key=lambda kv: -len(kv[0])):
        if lowered.endswith(suffix) and lowered[: -len(suffix)].strip():
            number = lowered[: -len(suffix)].strip()
            try:
                return int(number) * factor
            except ValueError:
                exact = float(number) * factor
                if not math.isfinite(exact) or exact != int(exact):
                    raise ValueError(text) from None
                return int(exact)
    return int(lowered)
