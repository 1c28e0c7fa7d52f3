"""S3Settings: where and how to reach a bucket, and the aiobotocore client they
make. botocore's own retries are off: the chokepoint retries, by error type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aioboto3
from botocore.config import Config


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where and how to reach the bucket. Credentials come from boto3's chain
    unless given."""

    bucket: str
    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: str = "auto"  # "auto", "path" or "virtual"
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    profile: str | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    max_pool_connections: int = 64

    def __repr__(self) -> str:
        """Every field; the secret key and session token redacted."""
        shown = []
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name in _SECRET_FIELDS and value:
                value = "<redacted>"
            shown.append(f"{name}={value!r}")
        return f"S3Settings({', '.join(shown)})"

    __str__ = __repr__


_SECRET_FIELDS = frozenset({"secret_access_key", "session_token"})


def s3_client(settings: S3Settings) -> Any:
    """A new aiobotocore S3 client for ``settings``, as an async context manager
    (entering it opens the client; leaving it closes it)."""
    session = aioboto3.Session(
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        aws_session_token=settings.session_token,
        profile_name=settings.profile,
        region_name=settings.region,
    )
    s3_options: Any = {"addressing_style": settings.addressing_style}
    config = Config(
        s3=s3_options,
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        retries={"total_max_attempts": 1, "mode": "standard"},
        max_pool_connections=settings.max_pool_connections,
        # We keep our own CRC32C; the SDK's default checksums cost CPU
        # and some S3-compatible servers reject them.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return session.client("s3", endpoint_url=settings.endpoint_url, config=config)
