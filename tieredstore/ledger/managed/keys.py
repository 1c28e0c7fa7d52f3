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
there (as in :mod:`tieredstore.metadata.keys`).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.errors import InvalidName
from tieredstore.ledger import managed_ledger_pb2 as pb
from tieredstore.segment.path import validate_name, validate_prefix

_HEAD = re.compile(r"head-([0-9]{20})")
_PAGE = re.compile(
    r"page-([0-9]{20})-([0-9]{20})-([0-9]{10})-([0-9]{20})-([0-9]{20})"
    r"-([0-9a-f]{16})-([0-9a-f]{16})"
)
_MAX_NUMBER = 10**20 - 1


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
        if not 0 < version <= _MAX_NUMBER:
            raise ValueError(f"head version {version} out of range")
        return f"{self.base}head-{version:020d}"

    def head_version(self, key: str) -> int | None:
        if not key.startswith(self.base):
            return None
        match = _HEAD.fullmatch(key[len(self.base) :])
        return int(match.group(1)) if match else None

    @property
    def pages_prefix(self) -> str:
        return self.base + "pages/"

    def page_ref(self, ledgers: Sequence[pb.LedgerInfo], page_hash: int, prev_hash: int
                 ) -> LedgerPageRef:
        """The key of the page holding ``ledgers`` (non-empty, ascending ids)."""
        if not ledgers:
            raise ValueError("a page holds at least one ledger")
        first, last = ledgers[0].ledgerId, ledgers[-1].ledgerId
        size = sum(info.size for info in ledgers)
        max_ts = max(info.timestamp for info in ledgers)
        numbers = (first, last, size, max_ts)
        if any(not 0 <= n <= _MAX_NUMBER for n in numbers) or len(ledgers) >= 10**10:
            raise ValueError(f"page numbers {numbers} do not fit a page key")
        if not (0 < page_hash < 2**64 and 0 <= prev_hash < 2**64):
            raise ValueError(f"page hashes {page_hash}, {prev_hash} out of range")
        key = (
            f"{self.pages_prefix}page-{first:020d}-{last:020d}-{len(ledgers):010d}"
            f"-{size:020d}-{max_ts:020d}-{page_hash:016x}-{prev_hash:016x}"
        )
        return LedgerPageRef(key, first, last, len(ledgers), size, max_ts, page_hash, prev_hash)

    def parse_page_key(self, key: str) -> LedgerPageRef | None:
        if not key.startswith(self.pages_prefix):
            return None
        match = _PAGE.fullmatch(key[len(self.pages_prefix) :])
        if match is None:
            return None
        first, last, count, size, max_ts = (int(g) for g in match.groups()[:5])
        page_hash, prev_hash = (int(g, 16) for g in match.groups()[5:])
        return LedgerPageRef(key, first, last, count, size, max_ts, page_hash, prev_hash)
