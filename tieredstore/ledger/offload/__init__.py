"""Ledger offload on the segment engine (PIP-17): :mod:`.offloader`
(``SegmentLedgerOffloader``: a sealed ledger copied out as one segment and its
index), :mod:`.offloaded` (the read handle of an offloaded ledger),
:mod:`.location` (where an offload's objects are kept) and
:mod:`.user_metadata` (what an offload records about its ledger)."""
