"""Whether a topic or queue a reader names is in the store: one check, over the
store's own listing of its queues (:func:`~tieredstore.store.listed_queues`,
``ReadOnlyMessageStore.queues()``), for the command line and Spark alike."""

from __future__ import annotations

from collections.abc import Sequence

LISTED_AT_MOST = 12  # an unknown name's message lists what exists when it is this short


def unknown_selected(existing: Sequence[tuple[str, int]], topic: str | None,
                     queue: int | None = None) -> str | None:
    """What is unknown when ``topic`` (and ``queue``, of that topic or, with
    ``topic`` None, of any) names nothing among ``existing``, the store's
    listing of its queues: ``unknown topic 'x'; topics: a, b``; None when both
    are there."""
    topics = sorted({t for t, _ in existing})
    if topic is not None and topic not in topics:
        return f"unknown topic {topic!r}; {_shown('topics', topics)}"
    if queue is None:
        return None
    ids = sorted({q for t, q in existing if topic is None or t == topic})
    if queue in ids:
        return None
    where = f"{topic}/{queue}" if topic is not None else str(queue)
    owner = f"topic {topic!r} has" if topic is not None else "the store has"
    return f"unknown queue {where}; {owner} {_shown('queues', [str(q) for q in ids])}"


def _shown(what: str, names: Sequence[str]) -> str:
    if not names:
        return f"the store has no {what}" if what == "topics" else f"no {what}"
    if len(names) > LISTED_AT_MOST:
        return f"{len(names)} {what} (tieredstore inspect topics lists them)"
    return f"{what}: {', '.join(names)}" if what == "topics" else f"{what} {', '.join(names)}"
