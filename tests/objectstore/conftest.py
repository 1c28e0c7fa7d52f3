"""Fixtures for the ObjectStore tests (the stores themselves are in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the backend the ``store`` fixture runs this test on.

    Lets a test skip one assertion for a test server that departs from AWS S3.
    """
    callspec = getattr(request.node, "callspec", None)
    return str(callspec.params["store"]) if callspec and "store" in callspec.params else ""
