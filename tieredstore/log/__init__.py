"""The broker's log objects (write mode ``log``): one object per group commit
holding every queue's new bytes, fenced as one series per broker.

See docs/format.md, "Log objects". Being built in steps: the format, the
series and index reading are here; the group committer, compaction and
recovery come next.
"""

from tieredstore.log.codec import Piece, encode_log_object
from tieredstore.log.errors import LogCorrupt, LogFenced
from tieredstore.log.index import read_index
from tieredstore.log.keys import LogPath
from tieredstore.log.series import LogEntry, LogSeries

__all__ = [
    "LogCorrupt",
    "LogEntry",
    "LogFenced",
    "LogPath",
    "LogSeries",
    "Piece",
    "encode_log_object",
    "read_index",
]
