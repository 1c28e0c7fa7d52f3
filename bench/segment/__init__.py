"""Benchmarks of the segment engine, below the store: sealed segments read
front to back, at random and while tailing; writes through the upload pool;
what a segment costs in requests, and at which chunk size (``segments``
writes, seals and opens the segments they read)."""
