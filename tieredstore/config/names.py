"""Names that become parts of object keys, and the S3 settings botocore would
refuse: checked when a configuration is built, before anything is written."""

from __future__ import annotations

import re
from typing import Protocol

from tieredstore.errors import ConfigError, InvalidName
from tieredstore.names import validate_name

# botocore's own rules, so that a bad name is a ConfigError here rather than a
# ParamValidationError or InvalidRegionError at the first request.
_BUCKET = re.compile(r"^[a-zA-Z0-9.\-_]{1,255}$")
_REGION = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?$")


class NamedSettings(Protocol):
    """The settings that check_names reads: TieredStoreConfig has them all."""

    @property
    def cluster(self) -> str: ...
    @property
    def broker(self) -> str: ...
    @property
    def key_prefix(self) -> str: ...
    @property
    def local_path(self) -> str: ...
    @property
    def s3_bucket(self) -> str: ...
    @property
    def s3_region(self) -> str: ...
    @property
    def s3_endpoint_url(self) -> str: ...


def check_names(config: NamedSettings) -> None:
    """Names that become parts of object keys, and S3 settings botocore would refuse."""
    for key in ("cluster", "broker"):
        try:
            validate_name(key, getattr(config, key))
        except InvalidName as exc:
            raise ConfigError(key, str(exc)) from None
    if config.key_prefix:
        for part in config.key_prefix.split("/"):
            if not part:
                raise ConfigError("key_prefix", f"{config.key_prefix!r} must be names "
                                                "joined by '/': no leading, trailing or "
                                                "double '/'")
            try:
                validate_name("key_prefix", part)
            except InvalidName as exc:
                raise ConfigError("key_prefix", f"{config.key_prefix!r}: {exc}") from None
    if not config.local_path:
        raise ConfigError("local_path", "must not be empty (use '.' for the working "
                                        "directory)")
    if config.s3_bucket and not _BUCKET.match(config.s3_bucket):
        raise ConfigError("s3_bucket", f"{config.s3_bucket!r} is not a bucket name: letters, "
                                       "digits, '.', '-' and '_', 1 to 255 of them "
                                       "(S3 itself takes 3 to 63 lower-case ones)")
    if config.s3_region and not _REGION.match(config.s3_region):
        raise ConfigError("s3_region", f"{config.s3_region!r} is not a region name "
                                       "(such as us-east-1)")
    url = config.s3_endpoint_url
    if url and not re.match(r"^https?://[^/\s]+", url):
        raise ConfigError("s3_endpoint_url", f"{url!r} must be an http:// or https:// URL "
                                             "(such as http://localhost:8333)")
