"""PendingUnits: units waiting for their commit-log bytes, as columns."""

from __future__ import annotations

import pytest

from tieredstore.store.formats.record import CqUnit, encode_unit
from tieredstore.store.write.pending import Pending, PendingUnits


def test_units_read_back_as_added_and_leave_in_dispatch_order() -> None:
    pending = PendingUnits()
    assert len(pending) == 0 and pending.first_end() is None and pending.ready(10**9) == 0
    pending.add(5, CqUnit(0, 100, 7, 1000), ("k",))
    pending.add_bare(6, [100, 250, 400], [150, 150, 150], [1001, 1002, 1003])
    pending.add(9, CqUnit(550, 50, 0, 1004))
    units = [CqUnit(0, 100, 7, 1000), CqUnit(100, 150, 0, 1001), CqUnit(250, 150, 0, 1002),
             CqUnit(400, 150, 0, 1003), CqUnit(550, 50, 0, 1004)]
    assert (pending.first, len(pending), pending.first_end()) == (5, 5, 100)
    assert pending.units(0, 100) == units and pending.units(7, 9) == units[2:4]
    assert pending.units(11, 20) == [] and pending.units(0, 5) == []
    # Ready: the units whose records end at or below the committed position.
    assert [pending.ready(c) for c in (99, 100, 399, 400, 600)] == [0, 1, 2, 3, 5]
    assert pending.encode(2) == encode_unit(units[0]) + encode_unit(units[1])
    assert pending.stamps(3) == [1000, 1001, 1002]
    assert pending.keyed_within(1) and pending.keyed() == [Pending(5, units[0], ("k",))]
    assert pending.messages(2) == [Pending(5, units[0], ("k",)), Pending(6, units[1], ())]
    pending.drop(2)
    assert (pending.first, len(pending), pending.first_end()) == (7, 3, 400)
    assert not pending.keyed_within(3) and pending.keyed() == []
    assert pending.units(0, 100) == units[2:]
    pending.drop(3)
    assert len(pending) == 0
    pending.add(42, CqUnit(600, 10, 0, 1))  # empty: any offset starts it again
    assert pending.first == 42


def test_a_unit_that_does_not_follow_the_last_is_refused() -> None:
    pending = PendingUnits()
    pending.add(3, CqUnit(0, 10, 0, 1))
    with pytest.raises(ValueError, match="offset 5 does not follow offset 3"):
        pending.add(5, CqUnit(10, 10, 0, 1))
    with pytest.raises(ValueError, match="offset 3 does not follow"):
        pending.add_bare(3, [10], [10], [1])
    assert len(pending) == 1
