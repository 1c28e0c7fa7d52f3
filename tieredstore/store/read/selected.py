"""Whether a topic or queue a reader names is in the store: one check, over the
store's own listing of its queues (:func:`~tieredstore.store.listed_queues`,
``ReadOnlyMessageStore.queues()``), for the command line and Spark alike; and
over a cluster's (``ReadOnlyCluster.queues()``): a topic on a broker the
reader left out is still unknown to it, and the message names that broker."""

from __future__ import annotations

from collections.abc import Collection, Sequence

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


def unknown_in_cluster(existing: Sequence[tuple[str, str, int]], topic: str | None,
                       queue: int | None = None, *, selected: Collection[str] | None = None,
                       brokers: Sequence[str] = ()) -> str | None:
    """:func:`unknown_selected` over ``existing``, a cluster's listing of
    ``(broker, topic, queue)``, read by the ``selected`` brokers (None: every
    broker): ``unknown broker 'x'; brokers: a, b`` when a selected broker is
    not among the cluster's ``brokers``; else what the selected brokers do not
    hold, with the brokers that hold it when some do."""
    if selected is not None:
        missing = [b for b in selected if b not in brokers]
        if missing:
            return f"unknown broker {missing[0]!r}; {_shown('brokers', list(brokers))}"
    chosen = [(t, q) for b, t, q in existing if selected is None or b in selected]
    problem = unknown_selected(chosen, topic, queue)
    if problem is None or selected is None:
        return problem
    holders = sorted({b for b, t, q in existing if topic in (None, t) and queue in (None, q)})
    if not holders:
        return problem
    which = f"broker {holders[0]} has" if len(holders) == 1 else \
        f"brokers {', '.join(holders)} have"
    return f"{problem}; {which} it (brokers read: {', '.join(selected)})"


def _shown(what: str, names: Sequence[str]) -> str:
    if not names:
        return f"the store has no {what}" if what != "queues" else f"no {what}"
    if len(names) > LISTED_AT_MOST:
        return f"{len(names)} {what} (tieredstore inspect {what} lists them)"
    return f"{what}: {', '.join(names)}" if what != "queues" else f"{what} {', '.join(names)}"
