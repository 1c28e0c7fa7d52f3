"""S3 ObjectStore on aioboto3: AWS S3 and compatible servers (SeaweedFS, MinIO...).

One aiobotocore client per store, opened on first use on the running loop and
kept for the store's life (clients are bound to the loop that opened them).
After ``fork`` the client is rebuilt rather than inherited. botocore's own
retries are off: the chokepoint retries, by error type. How settings become a
client is in :mod:`tieredstore.objectstore.backends.s3_settings`; how S3's errors map
onto the library's, in :mod:`tieredstore.objectstore.backends.s3_errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import botocore.exceptions

from tieredstore.checksum import crc32c
from tieredstore.errors import (
    AccessDenied,
    NoSuchBucket,
    ObjectNotFound,
    ObjectStoreError,
    ServerError,
    Throttled,
    TransientError,
)
from tieredstore.objectstore.backends.s3_errors import (
    is_throttling,
    translate_client_error,
    translate_error,
)
from tieredstore.objectstore.backends.s3_settings import S3Settings, s3_client, sse_arguments
from tieredstore.objectstore.base import (
    MAX_DELETE_BATCH,
    MAX_LIST_PAGE,
    ByteRange,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
    UploadInfo,
    check_part_number,
)
from tieredstore.objectstore.chokepoint import Chokepoint

__all__ = ["S3ObjectStore", "S3Settings"]

T = TypeVar("T")


class S3ObjectStore(ObjectStore):
    """ObjectStore on one S3 bucket."""

    name = "s3"

    def __init__(self, settings: S3Settings, *, chokepoint: Chokepoint | None = None) -> None:
        super().__init__(chokepoint=chokepoint)
        self.settings = settings
        self.bucket = settings.bucket
        self._sse = sse_arguments(settings)
        self._client: Any = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = os.getpid()
        self._opening: asyncio.Lock | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark ships stores to executors: carry settings, not live connections.
        return {"settings": self.settings, "policy": self.chokepoint.policy,
                "governor": self.chokepoint.governor_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        chokepoint = Chokepoint(state["policy"], governor=state.get("governor"))
        self.__init__(state["settings"], chokepoint=chokepoint)  # type: ignore[misc]

    async def _get_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is loop and self._pid == os.getpid():
            return self._client
        if self._pid != os.getpid() or (self._loop is not None and self._loop is not loop):
            # Forked, or used from another loop: the old client is unusable there.
            self._client, self._stack, self._opening = None, None, None
            self._pid = os.getpid()
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._client is None:
                stack = contextlib.AsyncExitStack()
                self._client = await stack.enter_async_context(s3_client(self.settings))
                self._stack = stack
                self._loop = loop
        return self._client

    async def _call(
        self,
        op: str,
        key: str,
        request: Callable[[Any], Awaitable[T]],
        *,
        bytes_up: int = 0,
    ) -> T:
        async def attempt() -> T:
            client = await self._get_client()
            try:
                return await request(client)
            except ObjectStoreError:
                raise
            except Exception as exc:
                error = translate_error(exc, op, key, self.bucket)
                if _code(exc) == "NoSuchBucket":  # whatever the request: say where
                    error = NoSuchBucket(self._missing(), op=op, key=key, bucket=self.bucket)
                raise error from exc

        return await self.chokepoint.call(op, attempt, bytes_up=bytes_up, key=key)

    async def _send(self, op: str, key: str, method: str, *, bytes_up: int = 0,
                    **params: Any) -> Any:
        """One request whose answer needs no reading inside the attempt: the
        client's ``method`` on the bucket with ``params``, its response."""
        return await self._call(
            op, key, lambda client: getattr(client, method)(Bucket=self.bucket, **params),
            bytes_up=bytes_up)

    async def close(self) -> None:
        # docstring inherited
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None and self._pid == os.getpid():
            await stack.aclose()

    def _where(self) -> str:
        return f" at {self.settings.endpoint_url}" if self.settings.endpoint_url else ""

    @property
    def server(self) -> str:
        """Which server: the endpoint, else AWS and the region (never a credential)."""
        return self.settings.endpoint_url or "AWS S3" + (
            f" ({self.settings.region})" if self.settings.region else "")

    def _missing(self) -> str:
        """That the bucket does not exist, naming it and where it was looked for."""
        return f"bucket {self.bucket!r} does not exist at {self.server}"

    def __repr__(self) -> str:
        return f"<S3ObjectStore bucket={self.bucket!r}{self._where()}>"

    async def create_bucket(self) -> None:
        """Create the bucket if it does not exist (tests, demos, first runs)."""

        async def request(client: Any) -> None:
            try:
                await client.head_bucket(Bucket=self.bucket)
            except botocore.exceptions.ClientError:
                await client.create_bucket(Bucket=self.bucket)

        await self._call("create_bucket", "", request)

    async def check_bucket(self) -> None:
        """Raise :class:`NoSuchBucket`, naming it, if the bucket does not exist.

        Credentials that may not ``HeadBucket`` (a policy granting object
        operations only) are not an error here: the requests that follow tell.
        """

        async def request(client: Any) -> None:
            try:
                await client.head_bucket(Bucket=self.bucket)
            except botocore.exceptions.ClientError as exc:
                error = translate_client_error(exc, "head_bucket", "", self.bucket)
                if isinstance(error, ObjectNotFound):
                    raise NoSuchBucket(
                        f"{self._missing()}; create it, or "
                        "set s3_create_bucket = true (the CLI: --create-bucket)",
                        op="head_bucket", bucket=self.bucket) from None
                if not isinstance(error, AccessDenied):
                    raise

        await self._call("head_bucket", "", request)

    # --- objects --------------------------------------------------------------

    async def put(
        self,
        key: str,
        data: bytes | memoryview,
        *,
        if_none_match: bool = False,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        # docstring inherited
        body = bytes(data)
        extra: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}
        extra.update(self._sse)
        if metadata:
            extra["Metadata"] = dict(metadata)
        resp = await self._send("put", key, "put_object", Key=key, Body=body,
                                bytes_up=len(body), **extra)
        return ObjectInfo(key, len(body), resp.get("ETag", ""), dict(metadata or {}))

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        # docstring inherited
        return await self._get(key, byte_range, with_crc=False)

    async def get_object_with_crc(self, key: str, byte_range: ByteRange | None = None
                                  ) -> ObjectData:
        """:meth:`get_object`, with the CRC32C of the bytes computed block by block
        as the body arrives, while each block is still in the CPU's cache (a
        second pass over the whole body would read it back from memory)."""
        return await self._get(key, byte_range, with_crc=True)

    async def _get(self, key: str, byte_range: ByteRange | None, *, with_crc: bool
                   ) -> ObjectData:
        extra = {"Range": byte_range.http_header()} if byte_range is not None else {}

        async def request(client: Any) -> ObjectData:
            resp = await client.get_object(Bucket=self.bucket, Key=key, **extra)
            crc: int | None = None
            async with resp["Body"] as stream:
                if with_crc:
                    data, crc = await _read_with_crc(stream.content)
                else:
                    data = await stream.read()
            expected = resp.get("ContentLength")
            if expected is not None and len(data) != expected:
                raise TransientError(
                    f"get {key!r}: short body, {len(data)} of {expected} bytes", op="get", key=key
                )
            # "bytes 0-99/1234" gives the whole size of a ranged answer.
            content_range = str(resp.get("ContentRange") or "")
            total = int(content_range.rsplit("/", 1)[1]) if "/" in content_range else len(data)
            info = ObjectInfo(key, total, resp.get("ETag", ""), resp.get("Metadata", {}))
            return ObjectData(data, info, crc)

        return await self._call("get", key, request)

    async def head(self, key: str) -> ObjectInfo:
        # docstring inherited
        resp = await self._send("head", key, "head_object", Key=key)
        return ObjectInfo(
            key, int(resp["ContentLength"]), resp.get("ETag", ""), resp.get("Metadata", {})
        )

    async def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        # docstring inherited
        token: str | None = None
        while True:
            extra: dict[str, Any] = {"ContinuationToken": token} if token else {}
            resp = await self._send("list", prefix, "list_objects_v2", Prefix=prefix,
                                    MaxKeys=MAX_LIST_PAGE, **extra)
            page = [
                ObjectInfo(o["Key"], int(o["Size"]), o.get("ETag", ""),
                           modified=o.get("LastModified"))
                for o in resp.get("Contents", [])
            ]
            if page:
                yield page
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token:
                return

    async def delete_many(self, keys: Sequence[str]) -> None:
        # docstring inherited
        for i in range(0, len(keys), MAX_DELETE_BATCH):
            batch = [{"Key": k} for k in keys[i : i + MAX_DELETE_BATCH]]

            async def request(client: Any, batch: list[dict[str, str]] = batch) -> None:
                resp = await client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
                errors = [e for e in resp.get("Errors", []) if e.get("Code") != "NoSuchKey"]
                if errors:
                    first = errors[0]
                    # A key answered SlowDown: the prefix is throttled (the governor).
                    kind = Throttled if is_throttling(str(first.get("Code"))) else ServerError
                    raise kind(
                        f"delete: {len(errors)} keys failed, first {first.get('Key')!r}: "
                        f"{first.get('Code')} {first.get('Message', '')}",
                        op="delete",
                        key=str(first.get("Key", "")),
                    )

            await self._call("delete", batch[0]["Key"], request)

    # --- multipart ----------------------------------------------------------

    async def create_multipart(
        self, key: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        # docstring inherited
        extra: dict[str, Any] = {"Metadata": dict(metadata)} if metadata else {}
        extra.update(self._sse)
        resp = await self._send("create_multipart", key, "create_multipart_upload", Key=key,
                                **extra)
        return str(resp["UploadId"])

    async def upload_part(
        self, key: str, upload_id: str, part_number: int, data: bytes | memoryview
    ) -> PartInfo:
        # docstring inherited
        check_part_number(key, part_number)
        body = bytes(data)
        resp = await self._send("upload_part", key, "upload_part", Key=key, UploadId=upload_id,
                                PartNumber=part_number, Body=body, bytes_up=len(body))
        return PartInfo(part_number, resp["ETag"], len(body))

    async def upload_part_copy(
        self,
        key: str,
        upload_id: str,
        part_number: int,
        source_key: str,
        source_range: ByteRange,
    ) -> PartInfo:
        # docstring inherited
        check_part_number(key, part_number)
        resp = await self._send(
            "upload_part_copy", key, "upload_part_copy", Key=key, UploadId=upload_id,
            PartNumber=part_number, CopySource={"Bucket": self.bucket, "Key": source_key},
            CopySourceRange=source_range.http_header())
        return PartInfo(part_number, resp["CopyPartResult"]["ETag"], source_range.length)

    async def complete_multipart(
        self,
        key: str,
        upload_id: str,
        parts: Sequence[PartInfo],
        *,
        if_none_match: bool = False,
    ) -> ObjectInfo:
        # docstring inherited
        extra: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}
        listed = [{"PartNumber": p.part_number, "ETag": p.etag} for p in parts]
        resp = await self._send("complete_multipart", key, "complete_multipart_upload", Key=key,
                                UploadId=upload_id, MultipartUpload={"Parts": listed}, **extra)
        return ObjectInfo(key, sum(p.size for p in parts), resp.get("ETag", ""))

    async def abort_multipart(self, key: str, upload_id: str) -> None:
        # docstring inherited
        with contextlib.suppress(ObjectNotFound):  # NoSuchUpload among them
            await self._send("abort_multipart", key, "abort_multipart_upload", Key=key,
                             UploadId=upload_id)

    async def list_multipart_uploads(self, prefix: str) -> list[UploadInfo]:
        # docstring inherited
        found: list[UploadInfo] = []
        markers: dict[str, Any] = {}
        while True:
            resp = await self._send("list_multipart_uploads", prefix, "list_multipart_uploads",
                                    Prefix=prefix, MaxUploads=MAX_LIST_PAGE, **markers)
            found.extend(
                UploadInfo(u["Key"], u["UploadId"], u.get("Initiated"))
                for u in resp.get("Uploads", [])
            )
            if not resp.get("IsTruncated"):
                break
            markers = {
                "KeyMarker": resp.get("NextKeyMarker", ""),
                "UploadIdMarker": resp.get("NextUploadIdMarker", ""),
            }
        found.sort(key=lambda u: (u.key, u.upload_id))
        return found


async def _read_with_crc(content: Any) -> tuple[bytes, int]:
    """The whole body of an aiohttp response stream and its CRC32C, taken over
    each block as it is handed over (``readany`` returns the blocks the socket
    gave, uncopied)."""
    blocks: list[bytes] = []
    crc = 0
    while block := await content.readany():
        crc = crc32c(block, crc)
        blocks.append(block)
    return b"".join(blocks), crc


def _code(exc: Exception) -> str:
    """An S3 error response's code ("" for any other failure)."""
    if isinstance(exc, botocore.exceptions.ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""
