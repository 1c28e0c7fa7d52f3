"""Configuration: units, per-topic overrides, the environment, the Pulsar keys."""
