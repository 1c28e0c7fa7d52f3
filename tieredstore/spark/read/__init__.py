"""Reading a store with Spark: the ``tieredstore`` format (batch and stream) and
the ``tieredstore-ledger`` format.

- :mod:`.datasource`: ``TieredStoreDataSource``, the format; :mod:`.bound`: one
  bound to a configuration on the driver.
- :mod:`.source`: what both formats are made of (``Source``, ``PlannedReader``).
- :mod:`.reader`: the batch reader, one planned slice per task;
  :mod:`.batches`: its rows as Arrow record batches.
- :mod:`.stream`: the Structured Streaming reader.
- :mod:`.plan`: slices planned from metadata; :mod:`.selection`: which queues,
  offsets and times; :mod:`.filters`, :mod:`.pushdown`: Spark's filters, not pushed.
- :mod:`.ledger_source`: ``tieredstore-ledger``, offloaded ledgers' entries.
"""
