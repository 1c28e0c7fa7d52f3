"""The directories a configuration names: can they hold what it puts there."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tieredstore.config.knobs import show_value
from tieredstore.errors import ConfigError

if TYPE_CHECKING:
    from tieredstore.config.model import TieredStoreConfig


def check_paths(config: TieredStoreConfig, *, backend: bool = True) -> None:
    """The directories the configuration names can hold what it puts there.

    Nothing is created: a directory that does not exist yet must have an
    existing directory as its nearest existing ancestor. The local store
    directory (checked when ``backend``) may be read-only (readers); the disk
    cache, when on, must be writable.
    """
    if backend and config.backend == "local":
        _check_dir("local_path", config.local_path, writable=False)
    if config.disk_cache_bytes > 0:
        key = "disk_cache_path" if config.disk_cache_path else "local_path"
        path = config.disk_cache_path or os.path.join(config.local_path, "cache")
        _check_dir(key, path, writable=True, what="the disk cache directory ")


def _check_dir(key: str, path: str, *, writable: bool, what: str = "") -> None:
    try:
        _check_dir_exists(key, path, writable=writable, what=what)
    except OSError as exc:  # a name too long, a loop of links...
        raise ConfigError(key, f"{what}{show_value(key, path)} cannot be used: "
                               f"{exc.strerror or exc}") from None


def _check_dir_exists(key: str, path: str, *, writable: bool, what: str) -> None:
    target = Path(path)
    if target.exists():
        if not target.is_dir():
            raise ConfigError(key, f"{what}{path!r} exists and is not a directory")
        if writable and not os.access(target, os.W_OK | os.X_OK):
            raise ConfigError(key, f"{what}{path!r} is not writable")
        return
    parent = target.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(key, f"{what}{path!r} cannot be created: {str(parent)!r} is not "
                               "a directory")
    if writable and not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(key, f"{what}{path!r} cannot be created: {str(parent)!r} is not "
                               "writable")
