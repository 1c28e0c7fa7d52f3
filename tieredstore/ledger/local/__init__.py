"""A ledger store on local files, for hosts without BookKeeper and for tests.

- :mod:`.files`: ``LedgerFiles``, the two files of each ledger (the bottom room).
- :mod:`.store`: ``LocalLedgerStore``, each ledger two files in one directory.
- :mod:`.recovery`: fencing a ledger for a new owner, as BookKeeper does.
- :mod:`.reader`: ``LocalReadHandle``, reads with each entry's digest checked.
- :mod:`.writer`: ``LocalLedgerWriter``, the one writer of a ledger.

Why files and not the segment engine: the local store plays BookKeeper's
part, the low-latency tier that entries are acknowledged from. An append is
one ``pwritev`` (and ``fsync``) here; on the segment engine it would be an
object PUT per entry, and chunk fencing (``If-None-Match`` per chunk key)
cannot stop an old writer from adding the next chunk after a new owner has
sealed the segment. The object store is where sealed ledgers go: the
offloader.
"""

from tieredstore.ledger.local.reader import LocalReadHandle
from tieredstore.ledger.local.store import LocalLedgerStore
from tieredstore.ledger.local.writer import LocalLedgerWriter

__all__ = ["LocalLedgerStore", "LocalLedgerWriter", "LocalReadHandle"]
