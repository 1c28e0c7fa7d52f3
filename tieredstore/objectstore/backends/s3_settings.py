"""S3Settings: where and how to reach a bucket, and the aiobotocore client they
make. botocore's own retries are off: the chokepoint retries, by error type."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from tieredstore.errors import ConfigError


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
    # Server-side encryption of every object written (puts and multipart uploads,
    # merges by UploadPartCopy included): "" (the bucket's default), "AES256"
    # (SSE-S3) or "aws:kms" (SSE-KMS, with an optional key id and encryption
    # context, a JSON object of strings).
    sse: str = ""
    sse_kms_key_id: str | None = None
    sse_kms_context: str | None = None

    def __post_init__(self) -> None:
        sse_arguments(self)  # refuses what S3 would

    def __repr__(self) -> str:
        """Every field; the secret key and session token redacted."""
        shown = []
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name in _SECRET_FIELDS and value:
                value = "<redacted>"
            shown.append(f"{name}={value!r}")
        return f"S3Settings({', '.join(shown)})"


_SECRET_FIELDS = frozenset({"secret_access_key", "session_token"})
SSE_MODES = ("", "AES256", "aws:kms")

# The providers of botocore's credential chain whose credentials the platform
# gives the machine, container or pod that resolves them, and refreshes there
# (instance profile, ECS/EKS container role, a web identity token file): a
# process elsewhere on that platform resolves its own, and a copy would expire.
PLATFORM_CREDENTIALS = ("iam-role", "container-role", "assume-role-with-web-identity")


@dataclass(frozen=True, slots=True)
class ChainCredentials:
    """Credentials boto3's chain resolved, as they were then; ``method``: the
    provider that found them (botocore's name: ``env``, ``shared-credentials-file``,
    ``assume-role``, ``sso``...). The secret and token never show."""

    access_key_id: str
    secret_access_key: str
    session_token: str  # "" if none (long-term credentials)
    method: str

    def __repr__(self) -> str:
        token = "<redacted>" if self.session_token else "''"
        return (f"ChainCredentials(access_key_id={self.access_key_id!r}, "
                f"secret_access_key='<redacted>', session_token={token}, "
                f"method={self.method!r})")


def chain_credentials() -> ChainCredentials | None:
    """What boto3's credential chain resolves in this process, from its
    environment and files (``AWS_ACCESS_KEY_ID``..., ``AWS_PROFILE``, the shared
    credentials and config files, a profile's assumed role, SSO or
    ``credential_process``), frozen as they are now; None if it finds none but
    the platform's (:data:`PLATFORM_CREDENTIALS`, which are not looked for, nor
    waited for: no instance metadata request is made)."""
    import botocore.session

    session = botocore.session.Session()
    resolver = session.get_component("credential_provider")
    for method in PLATFORM_CREDENTIALS:
        resolver.remove(method)
    found = session.get_credentials()
    if found is None:
        return None
    frozen = found.get_frozen_credentials()
    if not frozen.access_key or not frozen.secret_key:
        return None
    return ChainCredentials(frozen.access_key, frozen.secret_key, frozen.token or "",
                            str(found.method))


def sse_arguments(settings: S3Settings) -> dict[str, str]:
    """The request arguments of ``settings``' server-side encryption, for
    PutObject and CreateMultipartUpload (parts and copies take the upload's)."""
    if settings.sse not in SSE_MODES:
        raise ConfigError("s3_sse", f"must be one of {', '.join(map(repr, SSE_MODES))}, "
                                    f"got {settings.sse!r}")
    if settings.sse != "aws:kms" and (settings.sse_kms_key_id or settings.sse_kms_context):
        raise ConfigError("s3_sse_kms_key_id", "a KMS key id or encryption context needs "
                                               "s3_sse = 'aws:kms'")
    if not settings.sse:
        return {}
    out = {"ServerSideEncryption": settings.sse}
    if settings.sse_kms_key_id:
        out["SSEKMSKeyId"] = settings.sse_kms_key_id
    if settings.sse_kms_context:
        try:
            context = json.loads(settings.sse_kms_context)
        except ValueError as exc:
            raise ConfigError("s3_sse_kms_context", f"must be a JSON object: {exc}") from None
        if not isinstance(context, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in context.items()):
            raise ConfigError("s3_sse_kms_context", "must be a JSON object of strings")
        out["SSEKMSEncryptionContext"] = base64.b64encode(
            json.dumps(context, separators=(",", ":")).encode()).decode()
    return out


def s3_client(settings: S3Settings) -> Any:
    """A new aiobotocore S3 client for ``settings``, as an async context manager
    (entering it opens the client; leaving it closes it). aioboto3 is imported
    here, not with the module: a process that never opens an S3 store (a Spark
    worker over the local backend, the CLI on a directory) does not pay for
    importing it and aiohttp (about 0.3 s)."""
    import aioboto3
    from botocore.config import Config

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
