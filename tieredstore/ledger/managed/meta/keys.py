"""Where one managed ledger's metadata lives, and what its page keys say. Pure.

Under a root prefix, the managed ledger's name percent-encoded into one key
part (Pulsar's names hold ``/``: ``tenant/namespace/persistent/topic``)::

    {root}/ml/{name}/head-{version:020d}
    {root}/ml/{name}/pages/page-{first_ledger:020d}-{last_ledger:020d}-{count:010d}
        -{size:020d}-{max_timestamp_ms:020d}-{hash:016x}-{prev_hash:016x}

A page key says what a lookup or a retention decision needs without reading
the page: its ledger id range (ascending from page to page, so bisectable),
its ledger count, payload bytes and latest close time. ``hash`` digests the
page's bytes and ``prev_hash`` the page before it; the head names the newest
page's hash, and the pages it references are the chain walked back from
there (as in :mod:`tieredstore.metadata.keys`, whose head and page names
these are: :func:`~tieredstore.metadata.keys.head_name`, :class:`PageNames`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

import tieredstore.ledger.managed_ledger_pb2 as pb
from tieredstore.errors import InvalidName
from tieredstore.metadata.keys import PageNames, head_name, head_name_version
from tieredstore.names import validate_name, validate_prefix

# first ledger, last ledger, ledger count, size, max timestamp
_PAGE_NAMES = PageNames(20, 20, 10, 20, 20)


@dataclass(frozen=True, slots=True)
class LedgerPageRef:
    """What a page key says. The page holds ledgers ``first_ledger..last_ledger``."""

    key: str
    first_ledger: int
    last_ledger: int
    count: int
    size: int
    max_timestamp_ms: int
    page_hash: int
    prev_hash: int


@dataclass(frozen=True, slots=True)
class ManagedLedgerPath:
    """The metadata keys of the managed ledger ``name`` under ``root``."""

    root: str
    name: str

    def __post_init__(self) -> None:
        validate_prefix(self.root)
        if not isinstance(self.name, str) or not self.name:
            raise InvalidName("managed ledger name", str(self.name), "must be a non-empty str")
        validate_name("managed ledger name", self.encoded_name)

    @property
    def encoded_name(self) -> str:
        """The name as one key part (``/`` and anything unsafe percent-encoded)."""
        return urllib.parse.quote(self.name, safe="")

    @property
    def base(self) -> str:
        head = f"{self.root}/" if self.root else ""
        return f"{head}ml/{self.encoded_name}/"

    @property
    def heads_prefix(self) -> str:
        """Lists the heads only, never a page."""
        return self.base + "head-"

    def head_key(self, version: int) -> str:
        return self.base + head_name(version)

    def head_version(self, key: str) -> int | None:
        return head_name_version(key[len(self.base) :]) if key.startswith(self.base) else None

    @property
    def pages_prefix(self) -> str:
        return self.base + "pages/"

    def page_ref(self, ledgers: Sequence[pb.LedgerInfo], page_hash: int, prev_hash: int
                 ) -> LedgerPageRef:
        """The key of the page holding ``ledgers`` (non-empty, ascending ids)."""
        if not ledgers:
            raise ValueError("a page holds at least one ledger")
        numbers = (ledgers[0].ledgerId, ledgers[-1].ledgerId, len(ledgers),
                   sum(info.size for info in ledgers), max(info.timestamp for info in ledgers))
        key = self.pages_prefix + _PAGE_NAMES.name(numbers, page_hash, prev_hash)
        return LedgerPageRef(key, *numbers, page_hash, prev_hash)

    def parse_page_key(self, key: str) -> LedgerPageRef | None:
        prefix = self.pages_prefix
        found = _PAGE_NAMES.parse(key[len(prefix) :]) if key.startswith(prefix) else None
        return LedgerPageRef(key, *found) if found is not None else None
