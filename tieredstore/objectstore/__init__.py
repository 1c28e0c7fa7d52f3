"""The ObjectStore port and its backends: S3 (aioboto3), local directory, memory."""

from tieredstore.objectstore.backends.local import LocalObjectStore
from tieredstore.objectstore.backends.memory import MemoryObjectStore
from tieredstore.objectstore.backends.s3 import S3ObjectStore
from tieredstore.objectstore.backends.s3_settings import S3Settings
from tieredstore.objectstore.base import (
    MAX_DELETE_BATCH,
    MAX_LIST_PAGE,
    MAX_PART_SIZE,
    MAX_PARTS,
    MIN_PART_SIZE,
    ByteRange,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
    UploadInfo,
)
from tieredstore.objectstore.chokepoint import Chokepoint, RequestMetrics, RetryPolicy
from tieredstore.objectstore.forwarding import ForwardingObjectStore
from tieredstore.objectstore.governor import GET_CLASS, PUT_CLASS, Governor, GovernorOptions, Prices
from tieredstore.objectstore.probe import ConditionalWritesIgnored
from tieredstore.objectstore.read_only import ReadOnlyObjectStore, read_only
from tieredstore.objectstore.reads import CRC_METADATA_KEY

__all__ = [
    "CRC_METADATA_KEY",
    "MAX_DELETE_BATCH",
    "MAX_LIST_PAGE",
    "MAX_PARTS",
    "MAX_PART_SIZE",
    "MIN_PART_SIZE",
    "ByteRange",
    "Chokepoint",
    "ConditionalWritesIgnored",
    "ForwardingObjectStore",
    "Governor",
    "GovernorOptions",
    "LocalObjectStore",
    "MemoryObjectStore",
    "ObjectData",
    "ObjectInfo",
    "ObjectStore",
    "PartInfo",
    "GET_CLASS",
    "PUT_CLASS",
    "Prices",
    "ReadOnlyObjectStore",
    "RequestMetrics",
    "RetryPolicy",
    "S3ObjectStore",
    "S3Settings",
    "UploadInfo",
    "read_only",
]
