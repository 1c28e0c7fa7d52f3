"""The store's head properties, typed: the one place that parses and writes them.

A queue's head carries string properties (docs/metadata.md, Queue metadata):

- ``merging.<type>``: base offsets of sealed segments of that file type whose
  merge is owed, comma-separated, in the order they were sealed;
- ``clean_from.commitlog``: the commit-log position where clean records
  resume after dead space (a record cut short by a crash);
- ``index.from``: the offset from which the queue's key index covers it (set
  once, with the first message that has keys);
- ``rebuilt``: the queue's records were rebuilt from its segments once (or
  it had none); a writer's open does not rebuild it again (docs/damage.md,
  Heads lost: the rebuild).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tieredstore.segment import FileType

CLEAN_FROM = "clean_from.commitlog"
MERGING_PREFIX = "merging."
INDEX_FROM = "index.from"
REBUILT = "rebuilt"

Properties = Mapping[str, str]
Update = dict[str, str | None]


def clean_from(properties: Properties) -> int:
    """Where clean commit-log records resume (0: from the start)."""
    return int(properties.get(CLEAN_FROM, "0"))


def clean_from_update(position: int) -> Update:
    return {CLEAN_FROM: str(position)}


def index_from(properties: Properties) -> int | None:
    """The offset from which the key index covers the queue (None: no index)."""
    value = properties.get(INDEX_FROM)
    return None if value is None else int(value)


def index_from_update(offset: int) -> Update:
    return {INDEX_FROM: str(offset)}


def rebuilt(properties: Properties) -> bool:
    """Whether the queue's records were rebuilt from its segments once already."""
    return REBUILT in properties


def rebuilt_update() -> Update:
    return {REBUILT: "1"}


def merging_key(file_type: FileType) -> str:
    return f"{MERGING_PREFIX}{file_type.label}"


def merging(properties: Properties, file_type: FileType) -> list[int]:
    """The base offsets of the merges owed for ``file_type``."""
    return [int(p) for p in properties.get(merging_key(file_type), "").split(",") if p]


def merges_owed(properties: Properties) -> int:
    """How many merges are owed, every file type together."""
    return sum(len(merging(properties, t)) for t in FileType)


def merging_set(file_type: FileType, bases: Iterable[int]) -> Update:
    """The update that records exactly ``bases`` as owed (removes the key if none)."""
    return {merging_key(file_type): ",".join(map(str, bases)) or None}


def merging_update(properties: Properties, file_type: FileType, *, add: int | None = None,
                   remove: Iterable[int] = ()) -> Update:
    """The update that adds ``add`` to the owed merges and drops ``remove``."""
    dropped = set(remove)
    bases = [b for b in merging(properties, file_type) if b not in dropped]
    if add is not None and add not in bases:
        bases.append(add)
    return merging_set(file_type, bases)
