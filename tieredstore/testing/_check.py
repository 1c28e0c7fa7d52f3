"""Small assertion helpers for the conformance suites, so that the kit does not
need pytest to import (pytest runs the suites, but the kit's modules load
without it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Generic, TypeVar

E = TypeVar("E", bound=BaseException)


class Raised(Generic[E]):
    """What :func:`raises` caught: ``value`` is the exception."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: E | None = None

    @property
    def value(self) -> E:
        if self._value is None:
            raise AssertionError("the block has not raised (yet)")
        return self._value


@contextlib.contextmanager
def raises(kind: type[E], what: str = "") -> Iterator[Raised[E]]:
    """Like ``pytest.raises``: the block must raise ``kind`` (or a subclass).

    ``what`` names the call in the failure message.
    """
    caught: Raised[E] = Raised()
    try:
        yield caught
    except kind as exc:
        caught._value = exc
        return
    suffix = f": {what}" if what else ""
    raise AssertionError(f"did not raise {kind.__name__}{suffix}")
