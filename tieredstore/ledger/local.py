"""A ledger store on local files, for hosts without BookKeeper and for tests.

Each ledger is two files in one directory: ``{id:020d}.log``, its entry
records back to back (see :mod:`tieredstore.ledger.entrylog`: BookKeeper's
entry header and a CRC32C digest per entry), and ``{id:020d}.meta``, its
BookKeeper ledger metadata. The metadata file's existence is the ledger's:
it is created last (``link(2)``, so never half-written, and never over an
existing one) and deleted first. It is replaced by ``rename(2)``.

Fencing follows BookKeeper (seed 004). A ledger has one writer, the handle
that created it. Opening a ledger with ``recovery=True`` (a new owner taking
over) fences it: the metadata goes to ``IN_RECOVERY``, the log is scanned,
every digest checked, a torn tail cut off, and the ledger is closed at the
last whole entry. Every append and the writer's close hold an exclusive
``flock`` on the log file and check the state under it, so once a recovery
has begun the old writer's next append is refused with
:class:`~tieredstore.ledger.errors.LedgerFenced`, in this process or another.

Why files and not the segment engine: the local store plays BookKeeper's
part, the low-latency tier that entries are acknowledged from. An append is
one ``pwritev`` (and ``fsync``) here; on the segment engine it would be an
object PUT per entry, and chunk fencing (``If-None-Match`` per chunk key)
cannot stop an old writer from adding the next chunk after a new owner has
sealed the segment. The object store is where sealed ledgers go: the
offloader.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from tieredstore.ledger.entrylog import (
    RECORD_HEADER_SIZE,
    EntryLogError,
    check_record,
    decode_metadata,
    encode_metadata,
    encode_record,
)
from tieredstore.ledger.errors import (
    CorruptLedger,
    DigestMismatch,
    LedgerClosed,
    LedgerError,
    LedgerExists,
    LedgerFenced,
    LedgerNotFound,
)
from tieredstore.ledger.format import BytesLike
from tieredstore.ledger.handle import (
    DigestType,
    LedgerEntry,
    LedgerMetadata,
    LedgerState,
    ReadHandle,
    check_range,
)
from tieredstore.ledger.logfile import (
    check_id,
    flock,
    fsync_dir,
    pread_exact,
    pwrite_all,
    scan_log,
    write_file,
)

_META_NAME = re.compile(r"([0-9]{20})\.meta")


class LocalLedgerStore:
    """Ledgers as files under ``root``. ``fsync=False`` for tests only."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self.root.mkdir(parents=True, exist_ok=True)

    # --- paths ------------------------------------------------------------------

    def log_path(self, ledger_id: int) -> Path:
        return self.root / f"{check_id(ledger_id):020d}.log"

    def meta_path(self, ledger_id: int) -> Path:
        return self.root / f"{check_id(ledger_id):020d}.meta"

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
        data = encode_metadata(metadata)
        while True:
            tmp = self.root / f".{candidate:020d}.meta.{os.getpid()}.{time.monotonic_ns()}"
            write_file(tmp, data, self.fsync)
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
        return ids[-1] + 1 if ids else 0

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
        return await asyncio.to_thread(self._read_meta, ledger_id)

    def _read_meta(self, ledger_id: int) -> LedgerMetadata:
        try:
            data = self.meta_path(ledger_id).read_bytes()
        except FileNotFoundError:
            raise LedgerNotFound("no such ledger", ledger_id=ledger_id) from None
        try:
            return decode_metadata(data)
        except (EntryLogError, ValueError) as exc:
            raise CorruptLedger(f"metadata file: {exc}", ledger_id=ledger_id) from None

    def _write_meta(self, ledger_id: int, metadata: LedgerMetadata) -> None:
        path = self.meta_path(ledger_id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
        write_file(tmp, encode_metadata(metadata), self.fsync)
        os.replace(tmp, path)
        if self.fsync:
            fsync_dir(self.root)

    async def open_ledger(self, ledger_id: int, *, recovery: bool = False) -> LocalReadHandle:
        """Open a ledger for reading.

        Without ``recovery`` an open ledger is read as far as its log holds
        whole entries, and its writer goes on. With ``recovery`` the ledger is
        fenced and closed first (see the module docstring): its writer is
        refused from now on.
        """
        return await asyncio.to_thread(LocalReadHandle._open, self, ledger_id, recovery)

    async def delete_ledger(self, ledger_id: int) -> bool:
        """Delete a ledger; False if there was none. Its metadata goes first."""
        return await asyncio.to_thread(self._delete, ledger_id)

    def _delete(self, ledger_id: int) -> bool:
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

    # --- recovery ---------------------------------------------------------------

    def _recover(self, ledger_id: int, fd: int) -> LedgerMetadata:
        """Fence and close the ledger; the caller holds the log's flock."""
        metadata = self._read_meta(ledger_id)
        if metadata.state is LedgerState.CLOSED:
            return metadata
        if metadata.state is LedgerState.OPEN:
            metadata = replace(metadata, state=LedgerState.IN_RECOVERY)
            self._write_meta(ledger_id, metadata)  # the fence: the writer checks it
        offsets, end, length = scan_log(ledger_id, fd, verify=True)
        if os.fstat(fd).st_size != end:
            os.ftruncate(fd, end)  # a torn tail: never acknowledged
            if self.fsync:
                os.fsync(fd)
        metadata = replace(
            metadata, state=LedgerState.CLOSED, last_entry_id=len(offsets) - 1, length=length
        )
        self._write_meta(ledger_id, metadata)
        return metadata


class LocalReadHandle(ReadHandle):
    """Reads a local ledger; each entry's digest is checked."""

    def __init__(self, store: LocalLedgerStore, ledger_id: int, fd: int, *,
                 metadata: LedgerMetadata, offsets: list[int], end: int) -> None:
        self._store = store
        self._ledger_id = ledger_id
        self._fd: int | None = fd
        self._metadata = metadata
        self._offsets = offsets  # entry id -> record offset; then the end of the last
        self._offsets.append(end)

    @classmethod
    def _open(cls, store: LocalLedgerStore, ledger_id: int, recovery: bool) -> LocalReadHandle:
        try:
            fd = os.open(store.log_path(ledger_id), os.O_RDWR if recovery else os.O_RDONLY)
        except FileNotFoundError:
            raise LedgerNotFound("no such ledger", ledger_id=ledger_id) from None
        try:
            if recovery:
                with flock(fd):
                    metadata = store._recover(ledger_id, fd)
                    offsets, end, length = scan_log(ledger_id, fd, verify=False)
            else:
                metadata = store._read_meta(ledger_id)
                offsets, end, length = scan_log(ledger_id, fd, verify=False)
            if metadata.state is LedgerState.CLOSED:
                count = metadata.last_entry_id + 1
                if len(offsets) < count or (len(offsets) == count and length != metadata.length):
                    raise CorruptLedger(
                        f"closed at entry {metadata.last_entry_id} ({metadata.length} bytes), "
                        f"but its log holds {len(offsets)} entries ({length} bytes)",
                        ledger_id=ledger_id,
                    )
                if len(offsets) > count:  # bytes past the close: not part of the ledger
                    end = offsets[count]
                    del offsets[count:]
            else:
                metadata = replace(metadata, last_entry_id=len(offsets) - 1, length=length)
            return cls(store, ledger_id, fd, metadata=metadata, offsets=offsets, end=end)
        except BaseException:
            os.close(fd)
            raise

    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata

    def _check_open(self) -> int:
        if self._fd is None:
            raise LedgerClosed("the handle is closed", ledger_id=self._ledger_id)
        return self._fd

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        # docstring inherited
        fd = self._check_open()
        check_range(self._ledger_id, first, last, self.last_add_confirmed)
        start, end = self._offsets[first], self._offsets[last + 1]
        data = await asyncio.to_thread(pread_exact, fd, end - start, start, self._ledger_id)
        view = memoryview(data)
        out = []
        for entry_id in range(first, last + 1):
            a, b = self._offsets[entry_id] - start, self._offsets[entry_id + 1] - start
            try:
                payload = check_record(view[a:b], self._ledger_id, entry_id)
            except EntryLogError as exc:
                raise DigestMismatch(str(exc), ledger_id=self._ledger_id) from None
            out.append(LedgerEntry(entry_id, bytes(payload)))
        return out

    async def close(self) -> None:
        # docstring inherited
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class LocalLedgerWriter(LocalReadHandle):
    """The one writer of a local ledger; also reads what it wrote.

    ``close()`` closes the ledger (BookKeeper's ``WriteHandle.close``): it
    takes no more entries and its metadata records the last entry and length.
    """

    def __init__(self, store: LocalLedgerStore, ledger_id: int, fd: int,
                 metadata: LedgerMetadata) -> None:
        super().__init__(store, ledger_id, fd, metadata=metadata, offsets=[], end=0)
        self._lock = asyncio.Lock()
        self._failed: BaseException | None = None

    @classmethod
    def _for_new(cls, store: LocalLedgerStore, ledger_id: int) -> LocalLedgerWriter:
        fd = os.open(store.log_path(ledger_id), os.O_RDWR)
        return cls(store, ledger_id, fd, store._read_meta(ledger_id))

    async def append(self, payload: BytesLike) -> int:
        """Add an entry; return its id once it is durable."""
        return (await self.append_many([payload]))[0]

    async def append_many(self, payloads: Sequence[BytesLike]) -> list[int]:
        """Add entries with one write (and one fsync); return their ids."""
        async with self._lock:
            fd = self._check_open()
            if self._failed is not None:
                raise LedgerError(f"an earlier append failed, the ledger needs recovery: "
                                  f"{self._failed}", ledger_id=self._ledger_id)
            if not payloads:
                return []
            first = self.last_add_confirmed + 1
            buffers: list[BytesLike] = []
            sizes = []
            for i, payload in enumerate(payloads):
                try:
                    record = encode_record(self._ledger_id, first + i, first - 1, payload)
                except EntryLogError as exc:
                    raise ValueError(f"ledger {self._ledger_id}: {exc}") from None
                buffers += record
                sizes.append(memoryview(payload).nbytes)
            end = self._offsets[-1]
            try:
                await asyncio.to_thread(self._write, fd, buffers, end)
            except LedgerFenced:
                raise
            except BaseException as exc:
                # The bytes may be partly there; the next append would not know
                # where the log ends. Only a recovery (a new open) settles it.
                self._failed = exc
                raise
            offsets = self._offsets
            offsets.pop()
            for size in sizes:
                offsets.append(end)
                end += RECORD_HEADER_SIZE + size
            offsets.append(end)
            self._metadata = replace(
                self._metadata,
                last_entry_id=first + len(payloads) - 1,
                length=self._metadata.length + sum(sizes),
            )
            return list(range(first, first + len(payloads)))

    def _write(self, fd: int, buffers: list[BytesLike], end: int) -> None:
        with flock(fd):
            state = self._store._read_meta(self._ledger_id).state
            if state is not LedgerState.OPEN:
                raise LedgerFenced(
                    f"the ledger is {state.name}: a new owner opened it for recovery",
                    ledger_id=self._ledger_id,
                )
            if os.fstat(fd).st_size != end:
                os.ftruncate(fd, end)  # our own torn write: never acknowledged
            pwrite_all(fd, buffers, end)
            if self._store.fsync:
                os.fsync(fd)

    async def close(self) -> None:
        """Close the ledger at its last entry. Raises ``LedgerFenced`` if a
        recovery closed it at a different entry first."""
        async with self._lock:
            if self._fd is None:
                return
            fd = self._fd
            try:
                await asyncio.to_thread(self._seal, fd)
            finally:
                self._fd = None
                os.close(fd)

    def _seal(self, fd: int) -> None:
        with flock(fd):
            current = self._store._read_meta(self._ledger_id)
            if current.state is not LedgerState.OPEN:
                if (
                    current.state is LedgerState.CLOSED
                    and current.last_entry_id == self.last_add_confirmed
                ):
                    self._metadata = current
                    return
                raise LedgerFenced(
                    f"the ledger is {current.state.name} at entry {current.last_entry_id}, "
                    f"this writer had {self.last_add_confirmed}",
                    ledger_id=self._ledger_id,
                )
            self._metadata = replace(self._metadata, state=LedgerState.CLOSED)
            self._store._write_meta(self._ledger_id, self._metadata)
