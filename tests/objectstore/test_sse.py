"""Server-side encryption: every object a store writes carries the configured SSE,
puts and multipart uploads (parts copied by UploadPartCopy included), checked by
HEAD through plain boto3. moto takes SSE-S3 and SSE-KMS; SeaweedFS here takes
SSE-S3 and answers SSE-KMS with InternalError (it has no KMS provider), so it is
tested with SSE-S3 only."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import boto3
import pytest

from tests.conftest import _buckets
from tests.servers import ACCESS_KEY, SECRET_KEY, S3Server
from tests.store.conftest import small_config
from tieredstore.errors import ConfigError
from tieredstore.objectstore import ByteRange, S3ObjectStore, S3Settings
from tieredstore.store import AsyncMessageStore

pytestmark = [pytest.mark.s3]

MiB = 1024 * 1024


def settings(server: S3Server, **sse: Any) -> S3Settings:
    return S3Settings(bucket=f"sse-{os.getpid()}-{next(_buckets)}",
                      endpoint_url=server.endpoint_url, region="us-east-1",
                      addressing_style="path", access_key_id=ACCESS_KEY,
                      secret_access_key=SECRET_KEY, **sse)


def heads(server: S3Server, bucket: str) -> dict[str, dict[str, Any]]:
    """Every object of ``bucket`` and its HEAD, through plain boto3."""
    client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1",
                          aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket) for o in page.get("Contents", [])]
    return {k: client.head_object(Bucket=bucket, Key=k) for k in keys}


@pytest.mark.parametrize(("server_name", "sse"), [
    ("moto", {"sse": "AES256"}),
    ("moto", {"sse": "aws:kms", "sse_kms_key_id": "alias/tiered",
              "sse_kms_context": json.dumps({"app": "tieredstore"})}),
    ("seaweedfs", {"sse": "AES256"}),
])
async def test_puts_and_merged_uploads_are_encrypted(request: pytest.FixtureRequest,
                                                     server_name: str,
                                                     sse: dict[str, Any]) -> None:
    server = request.getfixturevalue(server_name)
    store = S3ObjectStore(settings(server, **sse))
    await store.create_bucket()
    try:
        await store.put("chunk", b"c" * 100)
        upload = await store.create_multipart("merged")
        part = await store.upload_part("merged", upload, 1, b"p" * (5 * MiB))
        copied = await store.upload_part_copy("merged", upload, 2, "chunk", ByteRange(0, 100))
        await store.complete_multipart("merged", upload, [part, copied])
        assert await store.get("merged", ByteRange(5 * MiB, 100)) == b"c" * 100
        found = heads(server, store.bucket)
        assert set(found) == {"chunk", "merged"}
        for key, head in found.items():
            assert head.get("ServerSideEncryption") == sse["sse"], key
            if "sse_kms_key_id" in sse:
                assert head.get("SSEKMSKeyId") == sse["sse_kms_key_id"], key
    finally:
        await store.close()


async def test_every_object_of_a_message_store_is_encrypted(moto: S3Server) -> None:
    bucket = f"sse-store-{os.getpid()}-{next(_buckets)}"
    config = small_config(backend="s3", s3_bucket=bucket, s3_endpoint_url=moto.endpoint_url,
                          s3_region="us-east-1", s3_addressing_style="path",
                          s3_access_key_id=ACCESS_KEY, s3_secret_access_key=SECRET_KEY,
                          s3_sse="AES256", gc_interval=0)
    store = await AsyncMessageStore.open(config)
    for i in range(300):  # rolls and merges segments: puts, uploads, copies
        await store.append("t", 0, b"%06d" % i * 100)
    await store.close()
    found = heads(moto, bucket)
    assert any(k.endswith("/segment") for k in found)  # a merged segment
    assert len(found) > 10
    assert {k for k, h in found.items() if h.get("ServerSideEncryption") != "AES256"} == set()


@pytest.mark.parametrize(("keys", "named"), [
    ({"s3_sse": "AES128"}, "s3_sse"),
    ({"s3_sse": "AES256", "s3_sse_kms_key_id": "k"}, "s3_sse_kms_key_id"),
    ({"s3_sse": "aws:kms", "s3_sse_kms_context": "{not json"}, "s3_sse_kms_context"),
    ({"s3_sse": "aws:kms", "s3_sse_kms_context": '{"a": 1}'}, "s3_sse_kms_context"),
])
def test_bad_encryption_settings_are_refused_naming_the_key(keys: dict[str, str],
                                                            named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        S3ObjectStore(S3Settings(bucket="b", sse=keys["s3_sse"],
                                 sse_kms_key_id=keys.get("s3_sse_kms_key_id"),
                                 sse_kms_context=keys.get("s3_sse_kms_context")))
    with pytest.raises(ConfigError, match=named):
        small_config(backend="s3", s3_bucket="b", **keys).options(S3Settings)


def test_the_encryption_context_goes_as_base64_json() -> None:
    from tieredstore.objectstore.backends.s3_settings import sse_arguments

    got = sse_arguments(S3Settings(bucket="b", sse="aws:kms",
                                   sse_kms_context='{"app": "t", "env": "prod"}'))
    assert json.loads(base64.b64decode(got["SSEKMSEncryptionContext"])) == \
        {"app": "t", "env": "prod"}
    assert got["ServerSideEncryption"] == "aws:kms" and "SSEKMSKeyId" not in got
