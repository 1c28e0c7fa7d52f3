"""Where an offloaded ledger's objects live: PIP-17's names under a prefix. Pure.

An offload attempt ``(ledger_id, uuid)`` is the two objects Pulsar's jcloud
offloader writes (``DataBlockUtils``)::

    {prefix}/{uuid}-ledger-{id}          the data object
    {prefix}/{uuid}-ledger-{id}-index    the index object

(with an empty prefix, at the bucket's root, where Pulsar looks). Both
PIP-17 names can be read back off a key (:func:`parse_offload_key`).
"""

from __future__ import annotations

import uuid as uuid_mod
from dataclasses import dataclass

from tieredstore.ledger.format import (
    ObjectName,
    as_uuid,
    data_object_name,
    index_object_name,
    parse_object_name,
)
from tieredstore.names import validate_prefix


@dataclass(frozen=True, slots=True)
class OffloadNamespace:
    """The part of the keys shared by every offload of one offloader: the prefix."""

    prefix: str = "offload"

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)

    def locate(self, ledger_id: int, uuid: uuid_mod.UUID | str) -> OffloadLocation:
        return OffloadLocation(self, ledger_id, as_uuid(uuid))

    @property
    def list_prefix(self) -> str:
        """Every key of the namespace's attempts starts with it (a listing finds them)."""
        return f"{self.prefix}/" if self.prefix else ""

    def attempt_of(self, key: str) -> OffloadLocation | None:
        """The attempt of this namespace ``key`` belongs to; None for another
        namespace's key, or one that is no offload's at all."""
        if not key.startswith(self.list_prefix):
            return None
        rest = key[len(self.list_prefix):]
        if "/" in rest:
            return None
        try:
            name = parse_object_name(rest)
        except ValueError:
            return None
        return self.locate(name.ledger_id, name.uuid)


@dataclass(frozen=True, slots=True)
class OffloadLocation:
    """The keys of one offload attempt of one ledger."""

    space: OffloadNamespace
    ledger_id: int
    uuid: uuid_mod.UUID

    @property
    def data_name(self) -> str:
        """PIP-17's ``{uuid}-ledger-{ledgerId}``."""
        return data_object_name(self.ledger_id, self.uuid)

    @property
    def index_name(self) -> str:
        """PIP-17's ``{uuid}-ledger-{ledgerId}-index``."""
        return index_object_name(self.ledger_id, self.uuid)

    @property
    def data_key(self) -> str:
        """The PIP-17 data object."""
        return self.space.list_prefix + self.data_name

    @property
    def index_key(self) -> str:
        """The PIP-17 index object."""
        return self.space.list_prefix + self.index_name

    @property
    def keys(self) -> tuple[str, str]:
        """The index key, then the data key: the order they are deleted in."""
        return self.index_key, self.data_key

    def __str__(self) -> str:
        return self.data_name


def parse_offload_key(key: str) -> ObjectName | None:
    """The PIP-17 name an offload key carries (its last part), or None if it
    carries none: the data object's name, or the index's."""
    try:
        return parse_object_name(key.rsplit("/", 1)[-1])
    except ValueError:
        return None
