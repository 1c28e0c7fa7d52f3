"""Pulsar adapter: the PIP-17 ledger offload formats and, around them, the offloader."""
