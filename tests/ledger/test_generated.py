"""The committed ``*_pb2`` modules are protoc's output for the ``.proto`` files
beside them, byte for byte: what ``make proto`` would write (a hand-edited
descriptor loads, but drifts from its source and from the next regeneration)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tieredstore

protoc = pytest.importorskip("grpc_tools.protoc")

PACKAGE = Path(tieredstore.__file__).parent
PROTOS = sorted(p.relative_to(PACKAGE) for d in ("metadata", "ledger")
                for p in (PACKAGE / d).glob("*.proto"))


@pytest.mark.parametrize("proto", PROTOS, ids=str)
def test_generated_modules_are_protocs_output(proto: Path, tmp_path: Path) -> None:
    source = PACKAGE / proto.parent
    # As the Makefile's `proto` target runs it.
    assert protoc.main(["protoc", f"-I{source}", f"--python_out={tmp_path}",
                        f"--pyi_out={tmp_path}", str(PACKAGE / proto)]) == 0
    for suffix in ("_pb2.py", "_pb2.pyi"):
        name = proto.stem + suffix
        assert (source / name).read_text() == (tmp_path / name).read_text(), (
            f"{proto.parent / name} is not what `make proto` generates from {proto}")
