from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class OffloadDriverMetadata(_message.Message):
    __slots__ = ("name", "properties")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, name: _Optional[str] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class OffloadContext(_message.Message):
    __slots__ = ("uidMsb", "uidLsb", "complete", "bookkeeperDeleted", "timestamp", "driverMetadata", "failure", "failedAt")
    UIDMSB_FIELD_NUMBER: _ClassVar[int]
    UIDLSB_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    BOOKKEEPERDELETED_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DRIVERMETADATA_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    FAILEDAT_FIELD_NUMBER: _ClassVar[int]
    uidMsb: int
    uidLsb: int
    complete: bool
    bookkeeperDeleted: bool
    timestamp: int
    driverMetadata: OffloadDriverMetadata
    failure: str
    failedAt: int
    def __init__(self, uidMsb: _Optional[int] = ..., uidLsb: _Optional[int] = ..., complete: _Optional[bool] = ..., bookkeeperDeleted: _Optional[bool] = ..., timestamp: _Optional[int] = ..., driverMetadata: _Optional[_Union[OffloadDriverMetadata, _Mapping]] = ..., failure: _Optional[str] = ..., failedAt: _Optional[int] = ...) -> None: ...

class LedgerInfo(_message.Message):
    __slots__ = ("ledgerId", "entries", "size", "timestamp", "offloadContext")
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    OFFLOADCONTEXT_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    entries: int
    size: int
    timestamp: int
    offloadContext: OffloadContext
    def __init__(self, ledgerId: _Optional[int] = ..., entries: _Optional[int] = ..., size: _Optional[int] = ..., timestamp: _Optional[int] = ..., offloadContext: _Optional[_Union[OffloadContext, _Mapping]] = ...) -> None: ...

class ManagedLedgerHead(_message.Message):
    __slots__ = ("formatVersion", "version", "writerId", "sessionId", "writtenAtMs", "pageSize", "firstLedgerId", "pagedThrough", "lastPageHash", "pagedEntries", "pagedSize", "pagedLedgers", "ledgers", "lastLedgerOpen", "properties", "pagesWritten")
    FORMATVERSION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WRITERID_FIELD_NUMBER: _ClassVar[int]
    SESSIONID_FIELD_NUMBER: _ClassVar[int]
    WRITTENATMS_FIELD_NUMBER: _ClassVar[int]
    PAGESIZE_FIELD_NUMBER: _ClassVar[int]
    FIRSTLEDGERID_FIELD_NUMBER: _ClassVar[int]
    PAGEDTHROUGH_FIELD_NUMBER: _ClassVar[int]
    LASTPAGEHASH_FIELD_NUMBER: _ClassVar[int]
    PAGEDENTRIES_FIELD_NUMBER: _ClassVar[int]
    PAGEDSIZE_FIELD_NUMBER: _ClassVar[int]
    PAGEDLEDGERS_FIELD_NUMBER: _ClassVar[int]
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    LASTLEDGEROPEN_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PAGESWRITTEN_FIELD_NUMBER: _ClassVar[int]
    formatVersion: int
    version: int
    writerId: str
    sessionId: str
    writtenAtMs: int
    pageSize: int
    firstLedgerId: int
    pagedThrough: int
    lastPageHash: int
    pagedEntries: int
    pagedSize: int
    pagedLedgers: int
    ledgers: _containers.RepeatedCompositeFieldContainer[LedgerInfo]
    lastLedgerOpen: bool
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    pagesWritten: int
    def __init__(self, formatVersion: _Optional[int] = ..., version: _Optional[int] = ..., writerId: _Optional[str] = ..., sessionId: _Optional[str] = ..., writtenAtMs: _Optional[int] = ..., pageSize: _Optional[int] = ..., firstLedgerId: _Optional[int] = ..., pagedThrough: _Optional[int] = ..., lastPageHash: _Optional[int] = ..., pagedEntries: _Optional[int] = ..., pagedSize: _Optional[int] = ..., pagedLedgers: _Optional[int] = ..., ledgers: _Optional[_Iterable[_Union[LedgerInfo, _Mapping]]] = ..., lastLedgerOpen: _Optional[bool] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., pagesWritten: _Optional[int] = ...) -> None: ...

class ManagedLedgerPage(_message.Message):
    __slots__ = ("formatVersion", "ledgers")
    FORMATVERSION_FIELD_NUMBER: _ClassVar[int]
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    formatVersion: int
    ledgers: _containers.RepeatedCompositeFieldContainer[LedgerInfo]
    def __init__(self, formatVersion: _Optional[int] = ..., ledgers: _Optional[_Iterable[_Union[LedgerInfo, _Mapping]]] = ...) -> None: ...
