"""Errors of the broker's log objects."""

from __future__ import annotations

from tieredstore.errors import Corrupt, Fenced


class LogCorrupt(Corrupt):
    """A log object's bytes are not what its format or its CRCs say; names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"log object {key}: {message}")
        self.key = key


class LogFenced(Fenced):
    """A newer store took the broker's log over: this one may not write to it."""
