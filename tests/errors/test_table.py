"""docs/errors.md and the tests stay in step: every row is a test, every test a row."""

from __future__ import annotations

import re

from tests.errors import test_api, test_cli, test_config, test_s3
from tests.errors.helpers import DOC

MODULES = (test_api, test_config, test_cli, test_s3)


def test_every_row_of_the_table_is_a_test_and_every_test_a_row() -> None:
    text = DOC.read_text()
    rows = re.findall(r"^\| ([A-Z]\d\d) \| (.+?) \| (.+?) \|$", text, flags=re.MULTILINE)
    assert len(rows) == len(re.findall(r"^\| [A-Z]\d\d \|", text, flags=re.MULTILINE)), \
        "a row that is not | id | input | what you get |"
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)), "a row id appears twice"
    tested: set[str] = set()
    for module in MODULES:
        cases = set(getattr(module, "CASES", {}))
        without = set(getattr(module, "CASES_WITHOUT_ERROR", {}))
        assert not cases & without
        tested |= cases | without
    assert set(ids) == tested, (f"rows without a test: {sorted(set(ids) - tested)}; "
                                f"tests without a row: {sorted(tested - set(ids))}")
