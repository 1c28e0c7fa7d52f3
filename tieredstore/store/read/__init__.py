"""Reading queues: the one scan, the reads built on it (get, tags, keys, around
damage, the durable tail) and the read-only views of queues."""
