"""A queue's committed state, and the rules that fold commit records into it.

The committed state of a queue (docs/opening.md, "The committed state of a
queue") is its head version, each file type's active segment with its
committed end ``E`` and the runs of generations that wrote it, and the times
maintenance needs. It starts from the newest checkpoint's and takes each
record of the entries above it in log-id order (docs/log-objects.md,
"Version 2"); a record that breaks a rule is :class:`LogCorrupt`, naming the
entry: a gap folded in silently would hand positions out again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from tieredstore.filetype import FileType
from tieredstore.log.commit.records import (
    ChunkCommit,
    CommitRecord,
    HeadCommit,
    RollCommit,
    TimesCommit,
)
from tieredstore.log.errors import LogCorrupt

QueueId = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Run:
    """From ``position`` on, the segment's chunks are generation ``generation``'s."""

    position: int
    generation: int


@dataclass(frozen=True, slots=True)
class ActiveFile:
    """A file type's active segment: chunks ``[0, end)`` in ``runs``."""

    segment_base: int
    end: int = 0
    runs: tuple[Run, ...] = ()


def _no_files() -> Mapping[FileType, ActiveFile]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class QueueState:
    """One queue's committed state."""

    head_version: int | None = None
    head_crc32c: int = 0
    files: Mapping[FileType, ActiveFile] = field(default_factory=_no_files)
    oldest_end_ms: int = 0
    active_first_ms: int = 0
    merges_owed: int = 0

    def with_file(self, file_type: FileType, active: ActiveFile) -> QueueState:
        return replace(self, files=MappingProxyType({**self.files, file_type: active}))


def apply(state: QueueState, record: CommitRecord) -> QueueState:
    """``state`` with ``record`` folded in; ValueError naming the broken rule."""
    match record:
        case HeadCommit():
            if state.head_version is not None and record.version <= state.head_version:
                raise ValueError(f"head version {record.version} is not above the "
                                 f"committed {state.head_version}")
            return replace(state, head_version=record.version, head_crc32c=record.crc32c)
        case RollCommit():
            active = state.files.get(record.file_type)
            if active is not None and record.segment_base <= active.segment_base:
                raise ValueError(f"roll of {record.file_type.label} to {record.segment_base} "
                                 f"is not above its active segment {active.segment_base}")
            return state.with_file(record.file_type, ActiveFile(record.segment_base))
        case ChunkCommit():
            return state.with_file(record.file_type,
                                   _extend(state.files.get(record.file_type), record))
        case TimesCommit():
            return replace(state, oldest_end_ms=record.oldest_end_ms,
                           active_first_ms=record.active_first_ms,
                           merges_owed=record.merges_owed)


def _extend(active: ActiveFile | None, chunk: ChunkCommit) -> ActiveFile:
    where = f"{chunk.file_type.label} segment {chunk.segment_base}"
    if active is None or active.segment_base != chunk.segment_base:
        raise ValueError(f"chunk of {where}, which is not the active segment "
                         f"({'none' if active is None else active.segment_base})")
    if chunk.position != active.end:
        raise ValueError(f"chunk [{chunk.position}, {chunk.end}) of {where} does not start "
                         f"at its committed end {active.end}")
    runs = active.runs
    if runs and chunk.generation < runs[-1].generation:
        raise ValueError(f"chunk of {where} by generation {chunk.generation}, below the "
                         f"{runs[-1].generation} that wrote before it")
    if not runs or chunk.generation != runs[-1].generation:
        runs = (*runs, Run(chunk.position, chunk.generation))
    return ActiveFile(active.segment_base, chunk.end, runs)


class CommittedState:
    """Every queue's committed state, folded entry by entry."""

    def __init__(self, states: Mapping[QueueId, QueueState] | None = None) -> None:
        self._states: dict[QueueId, QueueState] = dict(states or {})

    def __getitem__(self, queue: QueueId) -> QueueState:
        return self._states.get(queue, QueueState())

    def __contains__(self, queue: object) -> bool:
        return queue in self._states

    def __len__(self) -> int:
        return len(self._states)

    def items(self) -> Iterable[tuple[QueueId, QueueState]]:
        return sorted(self._states.items())

    def fold(self, key: str, records: Iterable[CommitRecord]) -> None:
        """The records of the entry at ``key``, in their order."""
        for record in records:
            queue = (record.topic, record.queue_id)
            try:
                self._states[queue] = apply(self[queue], record)
            except ValueError as exc:
                raise LogCorrupt(key, f"{queue[0]}/{queue[1]}: {exc}") from None
