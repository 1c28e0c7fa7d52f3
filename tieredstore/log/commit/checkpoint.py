"""Checkpoints: the committed state of every queue of the broker in one log entry.

A checkpoint (docs/log-objects.md, "Version 2") holds each queue's state,
back to back in (topic, queue) order, and an index of them: the ids of the
entries below it that still hold live pieces, then per queue its state's
offset, length and CRC32C, so a reader of a few queues reads ranges and a
reader of all of them one GET.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tieredstore.checksum import crc32c
from tieredstore.filetype import FileType
from tieredstore.log.commit.state import ActiveFile, QueueId, QueueState, Run
from tieredstore.log.errors import LogCorrupt
from tieredstore.log.format import (
    CHECKPOINT,
    HEADER_SIZE,
    VERSION_2,
    LogFooter,
    frame_index,
    header,
    pack_topic,
    unpack_topic,
)

_COUNT = struct.Struct(">I")
_ID = struct.Struct(">Q")
_SLOT = struct.Struct(">IQII")  # queue, state offset, state length, crc32c
_STATE = struct.Struct(">BQIqqIB")  # flags, head version, head crc, oldest end,
#                                      active first, merges owed, file count
_FILE = struct.Struct(">BQQH")  # file type, segment base, end, run count
_RUN = struct.Struct(">QQ")  # position, generation
_HAS_HEAD = 1


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one queue's state lies in a checkpoint."""

    offset: int
    length: int
    crc32c: int


@dataclass(frozen=True, slots=True)
class CheckpointIndex:
    """A checkpoint's index: the live entries below it and each queue's slot."""

    live: tuple[int, ...]
    slots: Mapping[QueueId, Slot]

    def span(self) -> tuple[int, int]:
        """The bytes holding every state: ``(offset, length)``."""
        if not self.slots:
            return HEADER_SIZE, 0
        end = max(s.offset + s.length for s in self.slots.values())
        return HEADER_SIZE, end - HEADER_SIZE


def encode_state(state: QueueState) -> bytes:
    flags = _HAS_HEAD if state.head_version is not None else 0
    out = [_STATE.pack(flags, state.head_version or 0, state.head_crc32c,
                       state.oldest_end_ms, state.active_first_ms, state.merges_owed,
                       len(state.files))]
    for file_type, active in sorted(state.files.items()):
        out.append(_FILE.pack(int(file_type), active.segment_base, active.end,
                              len(active.runs)))
        out += [_RUN.pack(run.position, run.generation) for run in active.runs]
    return b"".join(out)


def decode_state(data: bytes | memoryview, *, key: str) -> QueueState:
    view = memoryview(data)
    try:
        flags, version, crc, oldest, first, owed, count = _STATE.unpack_from(view, 0)
        at = _STATE.size
        state = QueueState(version if flags & _HAS_HEAD else None, crc,
                           oldest_end_ms=oldest, active_first_ms=first, merges_owed=owed)
        for _ in range(count):
            file_type, base, end, runs = _FILE.unpack_from(view, at)
            at += _FILE.size
            found = tuple(Run(*_RUN.unpack_from(view, at + i * _RUN.size))
                          for i in range(runs))
            at += runs * _RUN.size
            state = state.with_file(FileType(file_type), ActiveFile(base, end, found))
    except (struct.error, ValueError) as exc:
        raise LogCorrupt(key, f"a queue state is malformed: {exc}") from None
    if at != len(view):
        raise LogCorrupt(key, f"a queue state holds {len(view) - at} bytes past its end")
    return state


def encode_checkpoint(states: Mapping[QueueId, QueueState], live: Sequence[int]) -> bytes:
    """The checkpoint entry holding ``states`` and the ``live`` ids below it."""
    parts = [header(VERSION_2, CHECKPOINT)]
    index = [_COUNT.pack(len(live)), *(_ID.pack(n) for n in sorted(live)),
             _COUNT.pack(len(states))]
    offset = HEADER_SIZE
    for (topic, queue), state in sorted(states.items()):
        data = encode_state(state)
        parts.append(data)
        index += [pack_topic(topic, queue), _SLOT.pack(queue, offset, len(data), crc32c(data))]
        offset += len(data)
    parts += frame_index(b"".join(index), offset, 0, VERSION_2, CHECKPOINT)
    return b"".join(parts)


def decode_checkpoint_index(view: memoryview, footer: LogFooter, *, key: str
                            ) -> CheckpointIndex:
    """A checkpoint's index (``view``, CRC-checked), each slot inside its data."""
    slots: dict[QueueId, Slot] = {}
    try:
        (count,) = _COUNT.unpack_from(view, 0)
        at = _COUNT.size
        live = tuple(_ID.unpack_from(view, at + i * _ID.size)[0] for i in range(count))
        at += count * _ID.size
        (queues,) = _COUNT.unpack_from(view, at)
        at += _COUNT.size
        for _ in range(queues):
            topic, at = unpack_topic(view, at)
            queue, offset, length, crc = _SLOT.unpack_from(view, at)
            at += _SLOT.size
            slots[(topic, queue)] = Slot(offset, length, crc)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise LogCorrupt(key, f"checkpoint index is malformed: {exc}") from None
    if at != len(view):
        raise LogCorrupt(key, f"checkpoint index holds {len(view) - at} bytes past its end")
    for queue, slot in slots.items():
        if slot.offset < HEADER_SIZE or slot.offset + slot.length > footer.index_offset:
            raise LogCorrupt(key, f"state of {queue[0]}/{queue[1]} lies outside the data")
    return CheckpointIndex(live, slots)


def decode_states(data: bytes | memoryview, start: int, index: CheckpointIndex,
                  queues: Sequence[QueueId] | None = None, *, key: str
                  ) -> dict[QueueId, QueueState]:
    """The states of ``queues`` (all with None) from ``data``, the checkpoint's
    bytes from ``start`` on, each checked against its CRC32C."""
    view = memoryview(data)
    wanted = index.slots.keys() if queues is None else [q for q in queues if q in index.slots]
    states: dict[QueueId, QueueState] = {}
    for queue in wanted:
        slot = index.slots[queue]
        at = slot.offset - start
        if at < 0 or at + slot.length > len(view):
            raise LogCorrupt(key, f"state of {queue[0]}/{queue[1]} was not read")
        blob = view[at : at + slot.length]
        if crc32c(blob) != slot.crc32c:
            raise LogCorrupt(key, f"state of {queue[0]}/{queue[1]} fails its CRC32C")
        states[queue] = decode_state(blob, key=key)
    return states
