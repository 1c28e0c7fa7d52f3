"""Where an entry of a managed ledger is."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where an entry is: its ledger and its id in the ledger."""

    ledger_id: int
    entry_id: int
