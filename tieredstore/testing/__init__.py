"""Test tooling shipped with the library: a fault-injecting ObjectStore for chaos tests,
and a forwarding one to build test wrappers on."""

from tieredstore.testing.faults import (
    BEFORE_KINDS,
    DATA_KINDS,
    FAULT_OPS,
    FaultKind,
    FaultSchedule,
    FaultyObjectStore,
    InjectedFault,
)
from tieredstore.testing.forwarding import ForwardingObjectStore

__all__ = [
    "BEFORE_KINDS",
    "DATA_KINDS",
    "FAULT_OPS",
    "FaultKind",
    "FaultSchedule",
    "FaultyObjectStore",
    "ForwardingObjectStore",
    "InjectedFault",
]
