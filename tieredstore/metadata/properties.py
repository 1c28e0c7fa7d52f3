"""Queue properties: what a host notes in the head, set (or removed) with a
write. Checked here: str keys and values, at most MAX_PROPERTIES_BYTES."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import tieredstore.metadata.metadata_pb2 as pb
from tieredstore.metadata.errors import MetadataTooLarge

MAX_PROPERTIES_BYTES = 64 * 1024

PropertyUpdate = Callable[[Mapping[str, str]], Mapping[str, str | None]]


def apply_properties(head: pb.QueueHead, given: Mapping[str, str | None] | PropertyUpdate,
                     queue: str) -> None:
    """Set (None removes) properties on a head being built; check types and size.
    ``given`` may be a function of the head's properties that returns the changes.
    ``queue`` names the queue in the error."""
    updates = given(dict(head.properties)) if callable(given) else given
    for key, value in updates.items():
        if not isinstance(key, str) or not (value is None or isinstance(value, str)):
            raise TypeError(f"property {key!r}: keys and values are str (None removes)")
        if value is None:
            if key in head.properties:
                del head.properties[key]
        else:
            head.properties[key] = value
    size = sum(len(k.encode()) + len(v.encode()) for k, v in head.properties.items())
    if size > MAX_PROPERTIES_BYTES:
        raise MetadataTooLarge(
            f"properties would take {size} bytes, more than {MAX_PROPERTIES_BYTES}",
            queue=queue,
        )
