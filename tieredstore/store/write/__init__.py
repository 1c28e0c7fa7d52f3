"""Writing queues: a queue's flat files and key index, its pending units, and
recovery of lost heads."""
