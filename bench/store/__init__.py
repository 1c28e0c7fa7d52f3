"""Benchmarks of the message store and above (they may use the segment
benchmarks' readers): consume, append, queues quiet and busy, flushing
producers, restart at scale, encryption, and the Spark scan."""
