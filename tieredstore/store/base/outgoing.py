"""A message to append in a batch (:meth:`AsyncMessageStore.append_batch`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import is_, itemgetter
from typing import NamedTuple


class Outgoing(NamedTuple):
    """One message of a batch: its body and what ``append`` takes beside it.
    ``timestamp`` None: the store's clock when the batch is appended."""

    body: bytes
    keys: Sequence[str] = ()
    tags: str | None = None
    properties: Mapping[str, str] | None = None
    timestamp: int | None = None


def bare(messages: Sequence[Outgoing]) -> bool:
    """Whether no message has keys, tags or properties (bodies and timestamps
    alone: the records ``append_batch`` encodes a batch at a time)."""
    return (not any(map(itemgetter(1), messages)) and not any(map(itemgetter(3), messages))
            and all(map(is_, map(itemgetter(2), messages), repeat(None))))
