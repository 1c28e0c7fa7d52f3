"""The store a host embeds: the async store, the sync facade and its outbox, the
read-only store and cluster, the bucket watch."""
