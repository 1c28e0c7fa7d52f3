"""The kinds of flat file a queue keeps, one enum for every layer.

The numbers are the metadata's (``FileType`` in ``metadata.proto``), so a
member can be stored in a record as it is and a record's field read back with
``FileType(value)``; ``label`` is the name in object keys and in output.
"""

from __future__ import annotations

import enum


class FileType(enum.IntEnum):
    """A queue's flat files (RocketMQ's names)."""

    COMMIT_LOG = 1
    CONSUME_QUEUE = 2
    INDEX = 3

    @property
    def label(self) -> str:
        """``commitlog``, ``consumequeue`` or ``index``: its name in object keys."""
        return self.name.replace("_", "").lower()

    @classmethod
    def from_label(cls, label: str) -> FileType:
        """The file type whose :attr:`label` is ``label``."""
        for file_type in cls:
            if file_type.label == label:
                return file_type
        raise ValueError(f"unknown file type {label!r}; expected one of "
                         f"{[t.label for t in cls]}")
