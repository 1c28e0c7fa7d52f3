"""The broker's log objects (write mode ``log``): one object per group commit
holding every queue's new bytes, fenced as one series per broker.

See docs/log-objects.md, "Log objects": the format, the series, index reading,
the group committer (:class:`LogWriter`) with consolidation, compaction and
deletion of spent objects, recovery at open, and the pieces a reader that
never writes loads (:class:`LogSnapshot`).
"""

from tieredstore.log.commit.checkpoint import encode_checkpoint
from tieredstore.log.commit.loading import load_committed
from tieredstore.log.commit.records import (
    ChunkCommit,
    CommitRecord,
    HeadCommit,
    RollCommit,
    TimesCommit,
    encode_records,
)
from tieredstore.log.commit.state import ActiveFile, CommittedState, QueueState, Run
from tieredstore.log.errors import LogCorrupt, LogFenced
from tieredstore.log.format import Piece, encode_log_object
from tieredstore.log.gate import WriterGate
from tieredstore.log.index import DataIndex, read_entry, read_index
from tieredstore.log.keys import LogPath
from tieredstore.log.options import LogOptions
from tieredstore.log.pieces import LogIndexes, LogSnapshot
from tieredstore.log.recovery import recover_log
from tieredstore.log.series import LogSeries
from tieredstore.log.writer import LogWriter

__all__ = [
    "ActiveFile",
    "ChunkCommit",
    "CommitRecord",
    "CommittedState",
    "DataIndex",
    "HeadCommit",
    "QueueState",
    "RollCommit",
    "Run",
    "TimesCommit",
    "WriterGate",
    "encode_checkpoint",
    "encode_records",
    "load_committed",
    "read_entry",
    "LogCorrupt",
    "LogFenced",
    "LogOptions",
    "LogWriter",
    "LogPath",
    "LogSeries",
    "LogIndexes",
    "LogSnapshot",
    "Piece",
    "encode_log_object",
    "read_index",
    "recover_log",
]
