"""LocalLedgerStore: ledgers as files in one directory.

Each ledger is two files: ``{id:020d}.log``, its entry records back to back
(see :mod:`tieredstore.ledger.entrylog`: BookKeeper's entry header and a
CRC32C digest per entry), and ``{id:020d}.meta``, its BookKeeper ledger
metadata. The metadata file's existence is the ledger's: it is created last
(``link(2)``, so never half-written, and never over an existing one) and
deleted first. It is replaced by ``rename(2)``.

Ids are never given twice, as BookKeeper's: managed ledgers share the
directory, and one that deletes its ledger must never delete another's that
got the same id. A new ledger takes the id after the highest ledger present,
and at least the floor ``{id:020d}.next`` (an empty file) that each delete
raises to the deleted id + 1 before the ledger's files go.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterable

from tieredstore.ledger.errors import LedgerExists
from tieredstore.ledger.handle import DigestType, LedgerMetadata, LedgerState
from tieredstore.ledger.local.files import LedgerFiles
from tieredstore.ledger.local.reader import LocalReadHandle
from tieredstore.ledger.local.writer import LocalLedgerWriter
from tieredstore.ledger.logfile import fsync_dir

_META_NAME = re.compile(r"([0-9]{20})\.meta")
_FLOOR_NAME = re.compile(r"([0-9]{20})\.next")


class LocalLedgerStore(LedgerFiles):
    """Ledgers as files under ``root``. ``fsync=False`` for tests only."""

    # --- ledgers ----------------------------------------------------------------

    async def create_ledger(
        self,
        *,
        ensemble_size: int = 1,
        write_quorum_size: int = 1,
        ack_quorum_size: int = 1,
        custom_metadata: Iterable[tuple[str, bytes]] = (),
        ledger_id: int | None = None,
    ) -> LocalLedgerWriter:
        """Create a ledger (the next free id unless ``ledger_id`` is given) and
        return its writer. The quorum sizes are recorded as given; a local
        store keeps one copy."""
        metadata = LedgerMetadata(
            ensemble_size=ensemble_size,
            write_quorum_size=write_quorum_size,
            ack_quorum_size=ack_quorum_size,
            digest_type=DigestType.CRC32C,
            state=LedgerState.OPEN,
            ctime_ms=time.time_ns() // 1_000_000,
            ensembles=((0, tuple(f"local-{i}" for i in range(ensemble_size))),),
            custom_metadata=tuple(custom_metadata),
        )
        new_id = await asyncio.to_thread(self._create, ledger_id, metadata)
        return await asyncio.to_thread(LocalLedgerWriter._for_new, self, new_id)

    def _create(self, ledger_id: int | None, metadata: LedgerMetadata) -> int:
        candidate = ledger_id if ledger_id is not None else self._next_id()
        while True:
            tmp = self.write_tmp(metadata)
            try:
                if self.meta_path(candidate).exists():
                    raise FileExistsError
                # The log first: a log without metadata is no ledger (and is
                # truncated by the next create of that id).
                with open(self.log_path(candidate), "wb") as fh:
                    if self.fsync:
                        os.fsync(fh.fileno())
                os.link(tmp, self.meta_path(candidate))
                if self.fsync:
                    fsync_dir(self.root)
                return candidate
            except FileExistsError:
                if ledger_id is not None:
                    raise LedgerExists("exists already", ledger_id=ledger_id) from None
                candidate += 1
            finally:
                tmp.unlink(missing_ok=True)

    def _next_id(self) -> int:
        ids = self._list_ids()
        return max(ids[-1] + 1 if ids else 0, max(self._floors(), default=0))

    def _floors(self) -> list[int]:
        """The ``.next`` floors present (each delete leaves one; the highest counts)."""
        return [int(m.group(1)) for name in os.listdir(self.root)
                if (m := _FLOOR_NAME.fullmatch(name))]

    def _raise_floor(self, floor: int) -> None:
        """Make ``floor`` the lowest id a new ledger may take, durably, then drop
        the lower floors (a concurrent delete's higher one stays: the highest counts)."""
        (self.root / f"{floor:020d}.next").touch()
        if self.fsync:
            fsync_dir(self.root)
        for old in self._floors():
            if old < floor:
                (self.root / f"{old:020d}.next").unlink(missing_ok=True)

    def _list_ids(self) -> list[int]:
        found = []
        for name in os.listdir(self.root):
            match = _META_NAME.fullmatch(name)
            if match:
                found.append(int(match.group(1)))
        return sorted(found)

    async def ledger_ids(self) -> list[int]:
        """Every ledger in the store, ascending."""
        return await asyncio.to_thread(self._list_ids)

    async def exists(self, ledger_id: int) -> bool:
        return await asyncio.to_thread(self.meta_path(ledger_id).exists)

    async def metadata(self, ledger_id: int) -> LedgerMetadata:
        return await asyncio.to_thread(self.read_meta, ledger_id)

    async def open_ledger(self, ledger_id: int, *, recovery: bool = False) -> LocalReadHandle:
        """Open a ledger for reading.

        Without ``recovery`` an open ledger is read as far as its log holds
        whole entries, and its writer goes on. With ``recovery`` the ledger is
        fenced and closed first (see :mod:`.recovery`): its writer is refused
        from now on.
        """
        return await asyncio.to_thread(LocalReadHandle._open, self, ledger_id, recovery)

    async def delete_ledger(self, ledger_id: int) -> bool:
        """Delete a ledger; False if there was none. Its metadata goes first."""
        return await asyncio.to_thread(self._delete, ledger_id)

    def _delete(self, ledger_id: int) -> bool:
        if self.meta_path(ledger_id).exists():
            self._raise_floor(ledger_id + 1)  # before the id is free: never given again
        try:
            self.meta_path(ledger_id).unlink()
        except FileNotFoundError:
            existed = False
        else:
            existed = True
        self.log_path(ledger_id).unlink(missing_ok=True)
        if self.fsync:
            fsync_dir(self.root)
        return existed
