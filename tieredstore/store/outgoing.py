"""A message to append in a batch (:meth:`AsyncMessageStore.append_batch`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple


class Outgoing(NamedTuple):
    """One message of a batch: its body and what ``append`` takes beside it.
    ``timestamp`` None: the store's clock when the batch is appended."""

    body: bytes
    keys: Sequence[str] = ()
    tags: str | None = None
    properties: Mapping[str, str] | None = None
    timestamp: int | None = None
