"""The queues of a whole store, found from their heads alone."""

from __future__ import annotations

from collections.abc import Iterable

from tieredstore.metadata.keys import heads_root, parse_queue_head_key
from tieredstore.objectstore.base import ObjectStore


async def list_queues(store: ObjectStore, root: str, topics: Iterable[str] | None = None
                      ) -> list[tuple[str, int]]:
    """Every ``(topic, queue_id)`` with a head under ``root``, sorted; with
    ``topics``, those of the topics named, whose heads alone are listed.

    Lists the heads prefix only (about two keys a queue), never a page.
    """
    prefixes = {None: heads_root(root)} if topics is None else \
        {topic: f"{heads_root(root)}{topic}/" for topic in topics}
    found: set[tuple[str, int]] = set()
    for topic, prefix in prefixes.items():
        async for page in store.list_pages(prefix):
            found.update(q for q in (parse_queue_head_key(root, i.key) for i in page)
                         if q is not None and topic in (None, q[0]))
    return sorted(found)
