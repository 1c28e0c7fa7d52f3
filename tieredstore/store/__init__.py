"""The message store a host embeds: per-queue commit log and consume queue."""
