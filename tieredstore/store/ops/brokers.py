"""The brokers of a cluster and their writers, from the bucket alone (no broker
running).

Every store that opens writes its liveness record under its broker's metadata
root (``{key_prefix}/meta-root/{cluster}/{broker}/writers/live-...``,
:mod:`tieredstore.metadata.liveness`), so the names under the cluster's
metadata root are its brokers, whether they run or not: one paged LIST of that
root. The newest record under a broker's is its newest writer's.
"""

from __future__ import annotations

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import InvalidName
from tieredstore.metadata.liveness import Seen, newest, refuse_if_live
from tieredstore.names import validate_name
from tieredstore.objectstore.base import ObjectStore
from tieredstore.store.formats.keys import metadata_root


def cluster_root(config: TieredStoreConfig) -> str:
    """The prefix under which each broker of ``config``'s cluster has its metadata."""
    return metadata_root(config).rpartition("/")[0] + "/"


def root_broker(config: TieredStoreConfig, root: str) -> str:
    """The broker whose metadata root (:func:`metadata_root`) ``root`` is, of
    ``config``'s cluster."""
    return root.removeprefix(cluster_root(config))


async def list_brokers(store: ObjectStore, config: TieredStoreConfig) -> list[str]:
    """Every broker of ``config``'s cluster with metadata in the bucket, sorted;
    names that are not valid broker names (a stray key) are left out."""
    root = cluster_root(config)
    found = {info.key[len(root):].split("/", 1)[0] for info in await store.list_all(root)}
    brokers = []
    for broker in sorted(found):
        try:
            validate_name("broker", broker)
        except InvalidName:
            continue
        brokers.append(broker)
    return brokers



def writers_prefix(config: TieredStoreConfig) -> str:
    """Where the liveness records of ``config``'s broker's stores are."""
    return f"{metadata_root(config)}/writers/"


async def writer_seen(store: ObjectStore, config: TieredStoreConfig) -> Seen | None:
    """The liveness record of the newest store that opened ``config``'s broker,
    if it wrote one (one LIST, one GET)."""
    return await newest(store, writers_prefix(config))


async def refuse_live_writer(store: ObjectStore, config: TieredStoreConfig) -> None:
    """:class:`WriterLive` while the newest store of ``config``'s broker is live."""
    refuse_if_live(f"broker {config.cluster}/{config.broker}",
                   await writer_seen(store, config))
