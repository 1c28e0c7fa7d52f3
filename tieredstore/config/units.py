"""Human units both ways: sizes and durations as messages show them, and sizes
and durations as the environment and TOML strings give them (``8MiB``, ``72h``):
the one reader of units for the file, the environment, code and the command line."""

from __future__ import annotations

import math
import re

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


class UnitError(ValueError):
    """Text that names an amount in a unit that is ambiguous or missing; its
    message says what to write instead."""


# Sizes: plain bytes or an IEC unit (powers of 1024), any case, a space allowed.
_SIZE_UNITS = {"b": 1, "kib": KiB, "mib": MiB, "gib": GiB, "tib": 1024 * GiB}
# Refused: SI units read as 10^n by some tools and 2^(10n) by others (Pulsar's
# ``...Mbytes`` keys, RocketMQ's docs), and bare letters (``m`` is also minutes).
_AMBIGUOUS_SIZES = {"k": KiB, "kb": KiB, "m": MiB, "mb": MiB, "g": GiB, "gb": GiB,
                    "t": 1024 * GiB, "tb": 1024 * GiB}
_SI = {"k": 3, "m": 6, "g": 9, "t": 12}  # powers of 10
_AMOUNT = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)\s*([a-z]*)\s*$")

SIZE_HELP = "bytes, or with a unit: 512KiB, 8MiB, 1GiB (MB, GB, KB are refused as ambiguous)"


def _whole(number: str, factor: int, text: str) -> int:
    if re.fullmatch(r"[-+]?\d+", number):
        return int(number) * factor
    exact = float(number) * factor
    if not math.isfinite(exact) or exact != int(exact):
        raise ValueError(text)
    return int(exact)


def parse_size(text: str) -> int:
    """``4194304``, ``8MiB``, ``1.5KiB``, ``512 kib``, ``1_000``: a whole number of bytes.

    ``MB``, ``GB``, ``KB`` (and ``m``, ``g``, ``k``) are refused with
    :class:`UnitError`: ``4MB`` is 4,000,000 bytes to some tools and 4 MiB to
    others, and a misread size goes unnoticed; write ``4MiB`` or ``4000000``.
    """
    match = _AMOUNT.match(text.lower().replace("_", ""))
    if match is None:
        raise ValueError(text)
    number, unit = match.groups()
    if unit in _AMBIGUOUS_SIZES:
        shown = unit.upper() if len(unit) == 2 else unit
        binary = _whole(number, _AMBIGUOUS_SIZES[unit], text)
        iec = unit[0].upper() + "iB"
        power = _SI[unit[0]]
        decimal = float(number) * 10**power
        plain = f"{decimal:.0f}" if decimal == int(decimal) else f"{decimal:g}"
        raise UnitError(f"{text.strip()!r}: {shown} is ambiguous (10^{power} or "
                        f"2^{power * 10 // 3} bytes); write {number}{iec} ({binary} bytes) or "
                        f"{plain} (bytes)")
    if unit not in _SIZE_UNITS and unit:
        raise ValueError(text)
    return _whole(number, _SIZE_UNITS[unit or "b"], text)


# Durations: Go's notation (``1h30m``), and ``d`` for days; ``min`` as ``m``.
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+))\s*(ms|min|s|m|h|d)")
DURATION_HELP = "a duration with a unit: 500ms, 10s, 30m, 72h, 7d, 1h30m"


def parse_duration(text: str, *, bare: bool = True) -> float:
    """Seconds from ``500ms``, ``10s``, ``30m``, ``72h``, ``7d``, ``1h30m``; ``inf``.

    A plain number (``0.2``) is seconds when ``bare``; else it is refused with
    :class:`UnitError` (``72`` for a retention: hours to a RocketMQ operator,
    seconds to a Kafka one), except 0, which needs no unit.
    """
    lowered = text.strip().lower().replace("_", "")
    sign = -1.0 if lowered.startswith("-") else 1.0
    body = lowered.lstrip("+-").strip()
    if body in ("inf", "infinity"):
        return sign * math.inf
    if re.fullmatch(r"(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?", body):
        seconds = float(body)
        if not bare and seconds != 0:
            raise UnitError(f"{text.strip()!r} has no unit: write {body}h or {body}s (or "
                            f"{DURATION_HELP})")
        return sign * seconds
    total, at = 0.0, 0
    while at < len(body):
        match = _DURATION_PART.match(body, at)
        if match is None:
            raise ValueError(text)
        number, unit = float(match.group(1)), match.group(2)
        # ms divided, not multiplied by 0.001: 50ms is exactly the float 0.05.
        total += number / 1000 if unit == "ms" else number * _DURATION_UNITS[unit]
        at = match.end()
    if not body or not math.isfinite(total):
        raise ValueError(text)
    return sign * total
