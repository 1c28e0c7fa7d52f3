"""Writing queues: a queue's flat files and key index, its pending units, the
writers' registry, and recovery of lost heads."""
