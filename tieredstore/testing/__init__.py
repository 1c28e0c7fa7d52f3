"""Test tooling shipped with the library: a fault-injecting ObjectStore for chaos tests."""

from tieredstore.testing.faults import (
    BEFORE_KINDS,
    DATA_KINDS,
    FAULT_OPS,
    FaultKind,
    FaultSchedule,
    FaultyObjectStore,
    InjectedFault,
)

__all__ = [
    "BEFORE_KINDS",
    "DATA_KINDS",
    "FAULT_OPS",
    "FaultKind",
    "FaultSchedule",
    "FaultyObjectStore",
    "InjectedFault",
]
