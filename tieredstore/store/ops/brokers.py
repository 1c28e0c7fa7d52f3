"""The brokers of a cluster, from the bucket alone (no broker running).

Every store that opens registers under its broker's metadata root
(``{key_prefix}/meta-root/{cluster}/{broker}/writers/``, see
:mod:`tieredstore.store.write.writers`), so the names under the cluster's metadata
root are its brokers, whether they run or not. One paged LIST of that root.
"""

from __future__ import annotations

from tieredstore.config import TieredStoreConfig
from tieredstore.errors import InvalidName
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

