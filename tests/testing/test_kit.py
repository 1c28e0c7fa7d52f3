"""The conformance kit itself: it loads without pytest, its raises() checks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tieredstore.testing._check import raises


def test_the_kit_imports_without_pytest() -> None:
    code = (
        "import sys; import tieredstore.testing as t; "
        "assert t.ObjectStoreTests and t.SegmentReaderTests; "
        "assert 'pytest' not in sys.modules, 'the kit imported pytest'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_raises_catches_the_kind_and_fails_without_it() -> None:
    with raises(ValueError) as caught:
        raise ValueError("v")
    assert str(caught.value) == "v"
    with (
        pytest.raises(AssertionError, match="did not raise ValueError: the call"),
        raises(ValueError, "the call"),
    ):
        pass
    with pytest.raises(KeyError), raises(ValueError):  # another kind passes through
        raise KeyError("k")
