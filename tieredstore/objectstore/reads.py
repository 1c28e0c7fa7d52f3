"""Reading an object back to tell whether it is what we wrote.

After a conditional create finds its key taken, a writer reads the object to
tell its own earlier attempt (whose answer was lost) from another writer's.
One read can be damaged on the way (bits flipped, bytes cut short), and one
wrong answer would fence a live writer. So a read that does not match is
read again: the object is ours if a read matches, and another's only when two
reads return the same other bytes (damage on the way does not repeat itself).
Reads that keep coming back different are a transient failure.
"""

from __future__ import annotations

from collections.abc import Callable

from tieredstore.errors import ObjectNotFound, ServerError
from tieredstore.objectstore.base import ObjectStore

MATCH_ATTEMPTS = 6


async def stored_matches(store: ObjectStore, key: str, matches: Callable[[bytes], bool], *,
                         attempts: int = MATCH_ATTEMPTS) -> bool:
    """Whether the object at ``key`` satisfies ``matches``: True on a read that
    does, False when it is gone or two reads agree on other bytes."""
    previous: bytes | None = None
    for _ in range(attempts):
        try:
            data = await store.get(key)
        except ObjectNotFound:
            return False
        if matches(data):
            return True
        if data == previous:
            return False
        previous = data
    raise ServerError(f"{key}: {attempts} reads came back different; cannot tell whose it is",
                      op="get", key=key)
