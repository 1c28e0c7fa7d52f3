"""Byte sizes, defined once."""

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
