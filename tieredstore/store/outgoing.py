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


class Bodies(list[Outgoing]):
    """A checked batch of bodies alone (no keys, tags, properties or timestamps),
    as Outgoing; ``bodies`` holds the bytes, which the queue encodes in one pass."""

    __slots__ = ("bodies",)

    def __init__(self, bodies: list[bytes]) -> None:
        new = tuple.__new__  # Outgoing(body), built in C
        super().__init__([new(Outgoing, (b, (), None, None, None)) for b in bodies])
        self.bodies = bodies
