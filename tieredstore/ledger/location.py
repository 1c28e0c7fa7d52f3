"""Where an offloaded ledger's objects live: PIP-17 names on segment keys. Pure.

An offload attempt ``(ledger_id, uuid)`` is one segment of the segment
engine, whose topic is the PIP-17 data object name ``{uuid}-ledger-{id}``::

    {prefix}/{h}/{cluster}/{namespace}/{uuid}-ledger-{id}/0/commitlog/seg-00000000000000000000/
        chunk-{pos:020d}     while the offload writes (each with its CRC32C)
        sealed               while it merges
        segment              the data object: the PIP-17 blocks, then our unit table
    {prefix}/{h}/{cluster}/{namespace}/{uuid}-ledger-{id}/0/commitlog/{uuid}-ledger-{id}-index
                             the PIP-17 index object, byte for byte

``h`` is the segment engine's hash of the path, so attempts spread over S3
partitions. The index lies beside the segment's directory, not in it: the
engine refuses objects it did not write in a segment's prefix. Both PIP-17
names can be read back off any key (:func:`parse_offload_key`).
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
    """The part of the keys shared by every offload of one offloader."""

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
        """The attempt of this namespace ``key`` belongs to; None for another
        namespace's key, or one that is no offload's at all."""
        name = parse_offload_key(key)
        if name is None:
            return None
        location = self.locate(name.ledger_id, name.uuid)
        return location if key.startswith(location.attempt_prefix) else None


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
    def path(self) -> SegmentPath:
        """The segment that holds the data object."""
        return SegmentPath(self.space.cluster, self.space.namespace, self.data_name, 0,
                           FileType.COMMIT_LOG, 0, prefix=self.space.prefix)

    @property
    def data_key(self) -> str:
        """The merged segment object: the PIP-17 data bytes, then our unit table."""
        return self.path.merged_key

    @property
    def index_key(self) -> str:
        return self.path.file_prefix + self.index_name

    @property
    def attempt_prefix(self) -> str:
        """Every object of this attempt is under this prefix (a listing finds them)."""
        return self.path.file_prefix

    def __str__(self) -> str:
        return self.data_name


def parse_offload_key(key: str) -> ObjectName | None:
    """The PIP-17 name an offload key carries, or None if it carries none.

    For a data-side key (chunk, marker, segment) the name is the data object's;
    for the index, the index's.
    """
    for part in reversed(key.split("/")):
        try:
            return parse_object_name(part)
        except ValueError:
            continue
    return None

