"""The queues of a whole store, found from their heads alone."""

from __future__ import annotations

from collections.abc import Iterable

from tieredstore.metadata.keys import heads_root, parse_queue_head_key
from tieredstore.objectstore.base import ObjectStore


async def list_queues(store: ObjectStore, root: str, topics: Iterable[str] | None = None
                      ) -> list[tuple[str, int]]:
    """Every ``(topic, queue_id)`` with a head under ``root``, sorted; with
    ``topics``, those of the topics named, whose heads alone are listed."""
    return sorted(await newest_heads(store, root, topics))


async def newest_heads(store: ObjectStore, root: str, topics: Iterable[str] | None = None
                       ) -> dict[tuple[str, int], int]:
    """The newest head version listed of every ``(topic, queue_id)`` under
    ``root``; with ``topics``, of the topics named, whose heads alone are listed.

    Lists the heads prefix only (about two keys a queue), never a page.
    """
    prefixes = {None: heads_root(root)} if topics is None else \
        {topic: f"{heads_root(root)}{topic}/" for topic in topics}
    found: dict[tuple[str, int], int] = {}
    for topic, prefix in prefixes.items():
        async for page in store.list_pages(prefix):
            for info in page:
                head = parse_queue_head_key(root, info.key)
                if head is not None and topic in (None, head[0]):
                    found[head[:2]] = max(head[2], found.get(head[:2], 0))
    return found
