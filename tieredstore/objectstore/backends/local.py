"""Local-directory ObjectStore: the embedded default.

Behaves like S3 so that what works here works there: objects are immutable
files written to a temporary name, fsynced and then linked into place, so a
reader never sees half an object; ``If-None-Match: *`` is ``link(2)``, which
fails if the name is taken; multipart uploads keep their parts in a directory
per upload and refuse parts under 5 MiB but the last, as S3 does.

Layout under ``root``::

    objects/<k1>/<k2>/.../<kn>%obj     one file per object (see _encode_key)
    uploads/<upload-id>/info.json      key, metadata, start time of an upload
    uploads/<upload-id>/<part>.part    part bytes; <part>.etag beside it
    tmp/                               files being written

An object file holds the data, then its user metadata and ETag as JSON, then
the JSON's length (8 bytes, big-endian) and the magic ``TSO1``.

A GET of :data:`MAP_AT` bytes or more answers a read-only view of the file
mapped into memory (``mmap``, populated at once) rather than a copy: the
pages are the file system's cache, so a large read costs neither a copy nor
a fault per fresh page of memory (a Spark task reading 1 GiB of units spent
1.4 s of CPU reading copies, 0.7 s reading maps). An object file never
changes once linked into place, and a delete unlinks it, which leaves a
mapping whole; only a disk's read error reaches a mapped read differently,
as the process's ``SIGBUS`` rather than an ``OSError``.

Over 400 lines because it is the whole ObjectStore interface (objects,
conditional creates, listing, multipart uploads) on one directory layout
whose atomic steps (write, fsync, link, rename) every operation shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import itertools
import json
import mmap
import os
import shutil
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import quote, unquote

from tieredstore.checksum import crc32c
from tieredstore.errors import (
    InvalidRequest,
    NoSuchUpload,
    ObjectNotFound,
    ObjectStoreError,
    PreconditionFailed,
)
from tieredstore.objectstore.backends.blocking_backed import (
    BlockingBackedObjectStore,
    blocking,
    check_complete_parts,
    check_copy_range,
    check_part,
    check_range_start,
    multipart_etag,
)
from tieredstore.objectstore.base import (
    ByteRange,
    ObjectData,
    ObjectInfo,
    PartInfo,
    TemporaryFiles,
    UploadInfo,
)
from tieredstore.objectstore.chokepoint import Chokepoint

T = TypeVar("T")

_MAGIC = b"TSO1"
_TRAILER = struct.Struct(">Q4s")
_OBJ_SUFFIX = "%obj"  # '%' is always escaped in components, so no directory ends so
_COPY_BLOCK = 8 * 1024 * 1024
MAP_AT = 1024 * 1024  # a GET of this many bytes or more answers a mapping (see above)
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux: every page mapped at once
_IOV_MAX = 1024  # buffers per writev(2) (Linux and macOS allow this many)
_NAME_MAX = 255  # bytes in one file name on ext4, xfs, btrfs, tmpfs, APFS
# Brackets a component kept as it is (too long percent-encoded): percent-encoding
# escapes '+', so no percent-encoded name starts with it.
_RAW = "+"


def _encode_key(key: str) -> Path:
    parts = key.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise InvalidRequest(
                f"key {key!r} has an empty, '.' or '..' component; the local store refuses it",
                key=key,
            )
    encoded = [_encode_part(p) for p in parts[:-1]]
    encoded.append(_encode_part(parts[-1], _OBJ_SUFFIX))
    if any(len(name.encode()) > _NAME_MAX for name in encoded):
        raise InvalidRequest(
            f"key {key!r} has a component longer than a file name can be once escaped "
            f"({_NAME_MAX} bytes); the local store refuses it",
            key=key,
        )
    return Path(*encoded)


def _encode_part(part: str, suffix: str = "") -> str:
    """One key component as a file name (``suffix`` appended): percent-encoded
    where that fits a file name, else, if it holds no control character, its
    UTF-8 as it is between ``+`` and ``+`` (docs/local-backend.md, *Local directory
    backend*), so that any component of up to 200 UTF-8 bytes fits."""
    quoted = quote(part, safe="") + suffix
    if len(quoted) <= _NAME_MAX or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in part):
        return quoted
    return f"{_RAW}{part}{_RAW}{suffix}"


def _decode_part(name: str) -> str:
    if len(name) >= 2 and name[0] == _RAW and name[-1] == _RAW:
        return name[1:-1]
    return unquote(name)


def _decode_path(rel: str) -> str:
    return "/".join(_decode_part(p) for p in rel[: -len(_OBJ_SUFFIX)].split(os.sep))


def content_etag(data: bytes | memoryview) -> str:
    """The ETag of an object put whole: its CRC32C and size, quoted. S3 gives the
    MD5 there, but ETags are opaque (S3's own are not MD5s under SSE-KMS or for
    multipart objects), nothing here reads them as MD5s, and an MD5 of each chunk
    cost more than writing and fsyncing it (11 ms against 6 ms for 8 MiB)."""
    return f'"{crc32c(data):08x}-{len(data):x}"'


def _write_all(fd: int, pieces: list[bytes | memoryview]) -> None:
    """``writev`` until every byte of ``pieces`` is written (it may write less)."""
    views = [memoryview(p).cast("B") for p in pieces if len(p)]
    while views:
        n = os.writev(fd, views[:_IOV_MAX])
        while views and n >= len(views[0]):
            n -= len(views.pop(0))
        if n:
            views[0] = views[0][n:]


class _Temporaries:
    """The local directory's temporary files, for garbage collection."""

    def __init__(self, store: LocalObjectStore) -> None:
        self._store = store

    async def stale(self, older_than: datetime) -> list[str]:
        # docstring inherited
        return await self._store._stale_temporaries(older_than)

    async def delete(self, names: Sequence[str]) -> None:
        # docstring inherited
        await self._store._delete_temporaries(names)


class LocalObjectStore(BlockingBackedObjectStore):
    """Objects as files under a root directory (created if missing)."""

    name = "local"
    runs_in_threads = True

    @staticmethod
    def holds_store(root: str | os.PathLike[str]) -> bool:
        """Whether ``root`` is a directory a local object store was opened on."""
        return (Path(root) / "objects").is_dir()

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = True,
        chokepoint: Chokepoint | None = None,
    ) -> None:
        super().__init__(chokepoint=chokepoint)
        self.root = Path(root)
        self.fsync = fsync
        self._objects = self.root / "objects"
        self._uploads = self.root / "uploads"
        self._tmp = self.root / "tmp"
        self._tmp_prefix = uuid.uuid4().hex
        self._tmp_count = itertools.count()
        self.temporary_files: TemporaryFiles | None = _Temporaries(self)
        for d in (self._objects, self._uploads, self._tmp):
            d.mkdir(parents=True, exist_ok=True)

    async def _execute(self, op: str, key: str, call: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(call)
        except ObjectStoreError:
            raise
        except OSError as exc:  # a full disk, a read-only mount, lost permissions
            what = exc.strerror or type(exc).__name__
            where = f" ({exc.filename})" if exc.filename else ""
            raise ObjectStoreError(f"the local store at {self.root} failed: {what}{where}",
                                   key=key) from exc

    # --- file helpers ---------------------------------------------------------

    def _path(self, key: str) -> Path:
        return self._objects / _encode_key(key)

    def _sync_dir(self, path: Path) -> None:
        if not self.fsync:
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _tmp_name(self) -> Path:
        # Unique per store instance and call; no syscall (uuid4 reads the kernel's random).
        return self._tmp / f"{self._tmp_prefix}-{next(self._tmp_count)}"

    def _write_tmp(self, chunks: Iterable[bytes | memoryview], etag: str,
                   metadata: dict[str, str]) -> Path:
        """Write an object file under a temporary name (fsynced): its path.

        Plain ``os`` calls, as few as the write allows: each releases the GIL,
        and a worker thread waits for it again up to the interpreter's switch
        interval (5 ms) while the event loop's thread is busy appending.
        """
        trailer = json.dumps({"etag": etag, "metadata": metadata}).encode()
        tmp = self._tmp_name()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            first: list[bytes | memoryview] = []  # a list goes with the trailer, one writev
            if isinstance(chunks, list):
                first = chunks
            else:
                for chunk in chunks:
                    _write_all(fd, [chunk])
            _write_all(fd, [*first, trailer, _TRAILER.pack(len(trailer), _MAGIC)])
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        os.close(fd)
        return tmp

    def _link_into_place(self, tmp: Path, final: Path, key: str, exclusive: bool, op: str
                         ) -> None:
        placed = False
        try:
            for attempt in range(10):
                if attempt:  # the directory is missing (new, or a concurrent delete pruned it)
                    final.parent.mkdir(parents=True, exist_ok=True)
                try:
                    if exclusive:
                        os.link(tmp, final)
                    else:
                        os.replace(tmp, final)
                    placed = True
                    break
                except FileNotFoundError:
                    continue
                except FileExistsError:
                    raise PreconditionFailed(f"{key!r} already exists", op=op, key=key) from None
            else:
                raise ObjectStoreError(f"could not create directory for {key!r}", op=op, key=key)
            self._sync_dir(final.parent)
        finally:
            if exclusive or not placed:  # a link leaves the temporary name behind
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

    def _open(self, key: str, op: str) -> tuple[IO[bytes], int, dict[str, Any]]:
        """Open an object file; return it with its data size and trailer."""
        try:
            f = open(self._path(key), "rb")  # noqa: SIM115 - returned to the caller
        except FileNotFoundError:
            raise ObjectNotFound(f"no object {key!r}", op=op, key=key) from None
        try:
            file_size = os.fstat(f.fileno()).st_size
            if file_size < _TRAILER.size:
                raise ObjectStoreError(f"local object {key!r} is truncated", op=op, key=key)
            f.seek(file_size - _TRAILER.size)
            json_len, magic = _TRAILER.unpack(f.read(_TRAILER.size))
            if magic != _MAGIC:
                raise ObjectStoreError(
                    f"local object {key!r} has no trailer: not written by tieredstore",
                    op=op, key=key,
                )
            data_size = file_size - _TRAILER.size - json_len
            f.seek(data_size)
            trailer: dict[str, Any] = json.loads(f.read(json_len))
        except BaseException:
            f.close()
            raise
        return f, data_size, trailer

    # --- objects ----------------------------------------------------------------

    @blocking("put", sends="data")
    def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
            metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        # docstring inherited
        final = self._path(key)
        etag = content_etag(data)
        tmp = self._write_tmp([data], etag, dict(metadata or {}))
        self._link_into_place(tmp, final, key, if_none_match, "put")
        return ObjectInfo(key, len(data), etag, dict(metadata or {}))

    def _read(self, key: str, byte_range: ByteRange | None) -> ObjectData:
        f, size, trailer = self._open(key, "get")
        with f:
            info = ObjectInfo(key, size, trailer["etag"], trailer["metadata"])
            start = 0
            if byte_range is not None:
                check_range_start(key, size, byte_range, "get")
                start, size = byte_range.start, min(byte_range.end, size) - byte_range.start
            if size >= MAP_AT:
                return ObjectData(_mapped(f, start, size), info)
            f.seek(start)
            return ObjectData(f.read(size), info)

    @blocking("head")
    def head(self, key: str) -> ObjectInfo:
        # docstring inherited
        f, size, trailer = self._open(key, "head")
        f.close()
        return ObjectInfo(key, size, trailer["etag"], trailer["metadata"])

    @blocking("list")
    def _list(self, prefix: str) -> list[ObjectInfo]:
        # Walk the deepest directory the prefix names whole, then filter and sort.
        whole = prefix.split("/")[:-1]
        if any(p in ("", ".", "..") for p in whole):
            return []  # no key here has such a component; and '..' would walk outside root
        dir_parts = [_encode_part(p) for p in whole]
        base = self._objects.joinpath(*dir_parts)
        found: list[ObjectInfo] = []
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                if not name.endswith(_OBJ_SUFFIX):
                    continue
                key = _decode_path(os.path.relpath(os.path.join(dirpath, name), self._objects))
                if not key.startswith(prefix):
                    continue
                try:
                    f, size, trailer = self._open(key, "list")
                except ObjectNotFound:
                    continue  # deleted while we walked
                modified = datetime.fromtimestamp(os.fstat(f.fileno()).st_mtime, UTC)
                f.close()
                found.append(ObjectInfo(key, size, trailer["etag"], modified=modified))
        found.sort(key=lambda o: o.key)
        return found

    @blocking("delete")
    def _delete(self, keys: list[str]) -> None:
        parents: set[Path] = set()
        for path in [self._path(key) for key in keys]:  # every key checked first
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                parents.add(path.parent)
        for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):
            self._prune(parent)

    def _prune(self, directory: Path) -> None:
        while directory != self._objects and self._objects in directory.parents:
            try:
                directory.rmdir()
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                    return
                raise
            directory = directory.parent

    # --- multipart ----------------------------------------------------------

    def _upload_dir(self, key: str, upload_id: str, op: str) -> tuple[Path, dict[str, Any]]:
        if not upload_id.isalnum():
            raise NoSuchUpload(f"no upload {upload_id!r}", op=op, key=key)
        directory = self._uploads / upload_id
        try:
            info: dict[str, Any] = json.loads((directory / "info.json").read_text())
        except FileNotFoundError:
            raise NoSuchUpload(f"no upload {upload_id!r} for {key!r}", op=op, key=key) from None
        if info["key"] != key:
            raise NoSuchUpload(f"upload {upload_id!r} is not for {key!r}", op=op, key=key)
        return directory, info

    @blocking("create_multipart")
    def create_multipart(self, key: str, *, metadata: Mapping[str, str] | None = None) -> str:
        # docstring inherited
        self._path(key)  # refuse keys this store cannot hold
        upload_id = uuid.uuid4().hex
        directory = self._uploads / upload_id
        directory.mkdir()
        info = {"key": key, "metadata": dict(metadata or {}),
                "initiated": datetime.now(UTC).isoformat()}
        tmp = directory / "info.json.tmp"
        tmp.write_text(json.dumps(info))
        os.replace(tmp, directory / "info.json")
        self._sync_dir(directory)
        return upload_id

    def _store_part(self, directory: Path, number: int, blocks: Iterator[bytes]) -> PartInfo:
        digest = hashlib.md5(usedforsecurity=False)
        size = 0
        tmp = directory / f"{number:05d}.tmp-{uuid.uuid4().hex}"
        with open(tmp, "wb") as f:
            for block in blocks:
                digest.update(block)
                size += len(block)
                f.write(block)
            if self.fsync:
                os.fsync(f.fileno())
        etag = f'"{digest.hexdigest()}"'
        (directory / f"{number:05d}.etag").write_text(etag)
        os.replace(tmp, directory / f"{number:05d}.part")
        return PartInfo(number, etag, size)

    @blocking("upload_part", sends="data")
    def upload_part(self, key: str, upload_id: str, part_number: int,
                    data: bytes | memoryview) -> PartInfo:
        # docstring inherited
        check_part(key, part_number, len(data), "upload_part")
        directory, _ = self._upload_dir(key, upload_id, "upload_part")
        return self._store_part(directory, part_number, iter([bytes(data)]))

    @blocking("upload_part_copy")
    def upload_part_copy(self, key: str, upload_id: str, part_number: int, source_key: str,
                         source_range: ByteRange) -> PartInfo:
        # docstring inherited
        check_part(key, part_number, source_range.length, "upload_part_copy")
        directory, _ = self._upload_dir(key, upload_id, "upload_part_copy")
        f, size, _ = self._open(source_key, "upload_part_copy")
        with f:
            check_copy_range(source_key, size, source_range)
            f.seek(source_range.start)

            def blocks() -> Iterator[bytes]:
                left = source_range.length
                while left:
                    block = f.read(min(left, _COPY_BLOCK))
                    left -= len(block)
                    yield block

            return self._store_part(directory, part_number, blocks())

    @blocking("complete_multipart")
    def complete_multipart(self, key: str, upload_id: str, parts: Sequence[PartInfo], *,
                           if_none_match: bool = False) -> ObjectInfo:
        # docstring inherited
        directory, info = self._upload_dir(key, upload_id, "complete_multipart")

        def stored(n: int) -> tuple[str, int] | None:
            try:
                etag = (directory / f"{n:05d}.etag").read_text()
                return etag, (directory / f"{n:05d}.part").stat().st_size
            except FileNotFoundError:
                return None

        check_complete_parts(key, parts, stored)

        def blocks() -> Iterator[bytes]:
            for part in parts:
                with open(directory / f"{part.part_number:05d}.part", "rb") as f:
                    while block := f.read(_COPY_BLOCK):
                        yield block

        etag = multipart_etag([p.etag for p in parts])
        size = sum((directory / f"{p.part_number:05d}.part").stat().st_size for p in parts)
        tmp = self._write_tmp(blocks(), etag, info["metadata"])
        self._link_into_place(tmp, self._path(key), key, if_none_match, "complete_multipart")
        shutil.rmtree(directory, ignore_errors=True)
        return ObjectInfo(key, size, etag, info["metadata"])

    @blocking("abort_multipart")
    def abort_multipart(self, key: str, upload_id: str) -> None:
        # docstring inherited
        try:
            directory, _ = self._upload_dir(key, upload_id, "abort_multipart")
        except NoSuchUpload:
            return
        shutil.rmtree(directory, ignore_errors=True)

    async def _stale_temporaries(self, older_than: datetime) -> list[str]:
        def scan() -> list[str]:
            limit = older_than.timestamp()
            return sorted(p.name for p in self._tmp.iterdir()
                          if p.is_file() and p.stat().st_mtime < limit)

        return await self._execute("scan", "", scan)

    async def _delete_temporaries(self, names: Sequence[str]) -> None:
        def delete() -> None:
            for name in names:
                if "/" in name or name in ("", ".", ".."):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    (self._tmp / name).unlink()

        await self._execute("delete", "", delete)

    @blocking("list_multipart_uploads")
    def list_multipart_uploads(self, prefix: str) -> list[UploadInfo]:
        # docstring inherited
        found: list[UploadInfo] = []
        for directory in self._uploads.iterdir():
            try:
                info = json.loads((directory / "info.json").read_text())
            except (FileNotFoundError, NotADirectoryError):
                continue
            if info["key"].startswith(prefix):
                initiated = datetime.fromisoformat(info["initiated"])
                found.append(UploadInfo(info["key"], directory.name, initiated))
        found.sort(key=lambda u: (u.key, u.upload_id))
        return found


def _mapped(f: IO[bytes], start: int, size: int) -> memoryview:
    """Bytes ``[start, start + size)`` of the open file ``f`` as a read-only view
    of a mapping of them (which lives as long as the view or a slice of it)."""
    lead = start % mmap.ALLOCATIONGRANULARITY  # a mapping starts at a page
    mapping = mmap.mmap(f.fileno(), lead + size, offset=start - lead, prot=mmap.PROT_READ,
                        flags=mmap.MAP_SHARED | _POPULATE)
    return memoryview(mapping).toreadonly()[lead:]
