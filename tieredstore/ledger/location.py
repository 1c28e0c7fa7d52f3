"""Where an offloaded ledger's objects live: PIP-17's names under a prefix. Pure.

An offload attempt ``(ledger_id, uuid)`` is the two objects Pulsar's jcloud
offloader writes (``DataBlockUtils``)::

    {prefix}/{uuid}-ledger-{id}          the data object
    {prefix}/{uuid}-ledger-{id}-index    the index object

(with an empty prefix, at the bucket's root, where Pulsar looks). Attempts
written before this layout were one segment of the segment engine, with the
index beside its directory (docs/format.md, *The old layout*)::

    {prefix}/{h}/{cluster}/{namespace}/{uuid}-ledger-{id}/0/commitlog/seg-.../segment
    {prefix}/{h}/{cluster}/{namespace}/{uuid}-ledger-{id}/0/commitlog/{uuid}-ledger-{id}-index

They stay readable and sweepable: the ``legacy_*`` names. Both PIP-17 names
can be read back off any key (:func:`parse_offload_key`).
"""

from __future__ import annotations

import uuid as uuid_mod
from dataclasses import dataclass

from tieredstore.filetype import FileType
from tieredstore.ledger.format import (
    ObjectName,
    as_uuid,
    data_object_name,
    index_object_name,
    parse_object_name,
)
from tieredstore.names import validate_name, validate_prefix
from tieredstore.segment.path import SegmentPath


@dataclass(frozen=True, slots=True)
class OffloadNamespace:
    """The part of the keys shared by every offload of one offloader: the
    prefix (``cluster`` and ``namespace`` name old-layout attempts only)."""

    prefix: str = "offload"
    cluster: str = "pulsar"
    namespace: str = "ledgers"

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        validate_name("cluster", self.cluster)
        validate_name("namespace", self.namespace)

    def locate(self, ledger_id: int, uuid: uuid_mod.UUID | str) -> OffloadLocation:
        return OffloadLocation(self, ledger_id, as_uuid(uuid))

    @property
    def list_prefix(self) -> str:
        """Every key of the namespace's attempts starts with it (a listing finds them)."""
        return f"{self.prefix}/" if self.prefix else ""

    def attempt_of(self, key: str) -> OffloadLocation | None:
        """The attempt of this namespace ``key`` belongs to (either layout); None
        for another namespace's key, or one that is no offload's at all."""
        if not key.startswith(self.list_prefix):
            return None
        rest = key[len(self.list_prefix):]
        if "/" not in rest:
            try:
                name = parse_object_name(rest)
            except ValueError:
                return None
            return self.locate(name.ledger_id, name.uuid)
        found = parse_offload_key(key)
        if found is None:
            return None
        location = self.locate(found.ledger_id, found.uuid)
        return location if key.startswith(location.legacy_prefix) else None


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

    # --- the old layout: readable, never written --------------------------------

    @property
    def legacy_path(self) -> SegmentPath:
        """The segment that held an old-layout attempt's data."""
        return SegmentPath(self.space.cluster, self.space.namespace, self.data_name, 0,
                           FileType.COMMIT_LOG, 0, prefix=self.space.prefix)

    @property
    def legacy_data_key(self) -> str:
        """An old-layout attempt's merged segment: PIP-17 bytes, then a unit table."""
        return self.legacy_path.merged_key

    @property
    def legacy_index_key(self) -> str:
        return self.legacy_path.file_prefix + self.index_name

    @property
    def legacy_prefix(self) -> str:
        """Every object of an old-layout attempt is under this prefix."""
        return self.legacy_path.file_prefix

    def __str__(self) -> str:
        return self.data_name


def parse_offload_key(key: str) -> ObjectName | None:
    """The PIP-17 name an offload key carries, or None if it carries none.

    For a data-side key (the data object; an old layout's chunk, marker,
    segment) the name is the data object's; for the index, the index's.
    """
    for part in reversed(key.split("/")):
        try:
            return parse_object_name(part)
        except ValueError:
            continue
    return None
