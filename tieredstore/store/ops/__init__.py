"""Maintenance and checks over the bucket: verify, garbage collection, unmerged
segments, the cluster's brokers, queue summaries."""
