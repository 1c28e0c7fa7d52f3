"""A managed ledger's metadata (seed 001): :mod:`.metadata`
(``ManagedLedgerMetadata``, the head and its pages), :mod:`.state` (the state
it holds), :mod:`.keys` (the object keys) and :mod:`.format` (their encoding).
It imports no other room of :mod:`tieredstore.ledger.managed`."""
