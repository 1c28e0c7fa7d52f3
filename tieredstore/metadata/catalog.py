"""The queues of a whole store, found from their heads alone."""

from __future__ import annotations

from tieredstore.metadata.keys import heads_root, parse_queue_head_key
from tieredstore.objectstore.base import ObjectStore


async def list_queues(store: ObjectStore, root: str) -> list[tuple[str, int]]:
    """Every ``(topic, queue_id)`` with a head under ``root``, sorted.

    Lists the heads prefix only (about two keys a queue), never a page.
    """
    found: set[tuple[str, int]] = set()
    async for page in store.list_pages(heads_root(root)):
        for info in page:
            queue = parse_queue_head_key(root, info.key)
            if queue is not None:
                found.add(queue)
    return sorted(found)
