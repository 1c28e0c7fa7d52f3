"""The bytes and names the store writes: message records and consume-queue
units, their codec, key-index entries, head properties, object keys."""
