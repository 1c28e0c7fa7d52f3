"""LedgerFiles: the two files of each local ledger, under one directory.

``{id:020d}.log`` holds the entry records back to back, ``{id:020d}.meta`` the
ledger's BookKeeper metadata; a metadata file is written under a temporary
name first and renamed or linked into place. The store, its read handles,
its writer and recovery all read and write a ledger's files through this
room, the bottom of :mod:`tieredstore.ledger.local`.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from tieredstore.ledger.entrylog import decode_metadata, encode_metadata
from tieredstore.ledger.errors import CorruptLedger, LedgerNotFound
from tieredstore.ledger.handle import LedgerMetadata
from tieredstore.ledger.logfile import check_id, fsync_dir, write_file
from tieredstore.metadata.errors import CorruptMetadata


class LedgerFiles:
    """The ledger files under ``root``. ``fsync=False`` for tests only."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self.root.mkdir(parents=True, exist_ok=True)

    def log_path(self, ledger_id: int) -> Path:
        return self.root / f"{check_id(ledger_id):020d}.log"

    def meta_path(self, ledger_id: int) -> Path:
        return self.root / f"{check_id(ledger_id):020d}.meta"

    def read_meta(self, ledger_id: int) -> LedgerMetadata:
        path = self.meta_path(ledger_id)
        try:
            return decode_metadata(path.read_bytes(), path.name)
        except FileNotFoundError:
            raise LedgerNotFound(f"no such ledger in {os.path.abspath(self.root)}",
                                 ledger_id=ledger_id) from None
        except (CorruptMetadata, ValueError) as exc:
            raise CorruptLedger(f"metadata file: {exc}", ledger_id=ledger_id) from None

    def write_tmp(self, metadata: LedgerMetadata) -> Path:
        """A metadata file under a temporary name (a dot file, never listed)."""
        tmp = self.root / f".meta.{uuid.uuid4().hex}"
        write_file(tmp, encode_metadata(metadata), self.fsync)
        return tmp

    def write_meta(self, ledger_id: int, metadata: LedgerMetadata) -> None:
        os.replace(self.write_tmp(metadata), self.meta_path(ledger_id))
        if self.fsync:
            fsync_dir(self.root)
