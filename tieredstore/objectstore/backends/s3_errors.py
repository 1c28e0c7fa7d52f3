"""S3's errors in the library's hierarchy: by error code and HTTP status, never
by message text, so that the chokepoint retries by error type."""

from __future__ import annotations

import botocore.exceptions

from tieredstore.errors import (
    AccessDenied,
    InvalidRequest,
    NoSuchUpload,
    ObjectNotFound,
    ObjectStoreError,
    PreconditionFailed,
    RequestTimeout,
    ServerError,
    Throttled,
    TransientError,
)

_NOT_FOUND = {"NoSuchKey", "NotFound", "404", "NoSuchBucket"}
_PRECONDITION = {"PreconditionFailed", "412"}
_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
              "TooManyRequests", "503", "429", "RequestThrottled"}
_SERVER = {"InternalError", "ServiceUnavailable", "500", "502", "504", "BadGateway",
           "GatewayTimeout", "ConditionalRequestConflict", "OperationAborted"}
_TIMEOUT = {"RequestTimeout", "RequestTimeoutException"}
# A feature the server lacks (501): permanent, though a 5xx.
_NOT_IMPLEMENTED = {"NotImplemented", "501"}
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403",
                "AllAccessDisabled", "ExpiredToken", "InvalidToken"}


def is_throttling(code: str) -> bool:
    """Whether an S3 error code says the request rate was too high (SlowDown)."""
    return code in _THROTTLED


def translate_client_error(exc: botocore.exceptions.ClientError, op: str, key: str,
                           bucket: str = "") -> Exception:
    """Map an S3 error response to our hierarchy by its code and status."""
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    message = f"{op} {key!r}: {code} {error.get('Message', '')}".strip()
    if code == "NoSuchBucket" and bucket:
        message = f"{op} {key!r}: NoSuchBucket: bucket {bucket!r} does not exist"
    if code == "NoSuchUpload":
        return NoSuchUpload(message, op=op, key=key)
    if code in _NOT_FOUND or status == 404:
        return ObjectNotFound(message, op=op, key=key)
    if code in _PRECONDITION or status == 412:
        return PreconditionFailed(message, op=op, key=key)
    if code in _THROTTLED or status in (429, 503):
        return Throttled(message, op=op, key=key)
    if code in _TIMEOUT or status == 408:
        return RequestTimeout(message, op=op, key=key)
    if code in _NOT_IMPLEMENTED or status == 501:
        return InvalidRequest(message, op=op, key=key)
    if code in _SERVER or status >= 500:
        return ServerError(message, op=op, key=key)
    if code in _DENIED or status == 403:
        return AccessDenied(message, op=op, key=key)
    if 400 <= status < 500:
        return InvalidRequest(message, op=op, key=key)
    return ObjectStoreError(message, op=op, key=key)


def translate_error(exc: Exception, op: str, key: str, bucket: str = "") -> Exception:
    """Map any exception from botocore/aiohttp into our hierarchy."""
    if isinstance(exc, botocore.exceptions.ClientError):
        return translate_client_error(exc, op, key, bucket)
    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return AccessDenied(f"{op} {key!r}: no S3 credentials in this process: set "
                            "s3_access_key_id and s3_secret_access_key (s3_session_token for "
                            "temporary ones), or give boto3's chain some (AWS_ACCESS_KEY_ID "
                            "and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws, an instance "
                            "role); Spark's executors use the driver's unless it has only an "
                            "instance's or container's role (docs/spark-shipping.md)",
                            op=op, key=key)
    timeouts = botocore.exceptions.ConnectTimeoutError | botocore.exceptions.ReadTimeoutError
    if isinstance(exc, timeouts):
        return RequestTimeout(f"{op} {key!r}: {exc}", op=op, key=key)
    if isinstance(
        exc,
        botocore.exceptions.EndpointConnectionError
        | botocore.exceptions.ConnectionClosedError
        | botocore.exceptions.ResponseStreamingError
        | botocore.exceptions.IncompleteReadError
        | ConnectionError
        | OSError,
    ):
        return TransientError(f"{op} {key!r}: {type(exc).__name__}: {exc}", op=op, key=key)
    if type(exc).__module__.startswith("aiohttp"):
        return TransientError(f"{op} {key!r}: {type(exc).__name__}: {exc}", op=op, key=key)
    return ObjectStoreError(f"{op} {key!r}: {type(exc).__name__}: {exc}", op=op, key=key)
