from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FileType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILE_TYPE_UNSPECIFIED: _ClassVar[FileType]
    COMMIT_LOG: _ClassVar[FileType]
    CONSUME_QUEUE: _ClassVar[FileType]
    INDEX: _ClassVar[FileType]
FILE_TYPE_UNSPECIFIED: FileType
COMMIT_LOG: FileType
CONSUME_QUEUE: FileType
INDEX: FileType

class SegmentRecord(_message.Message):
    __slots__ = ("file_type", "base_offset", "size", "first_message_offset", "last_message_offset", "begin_timestamp_ms", "end_timestamp_ms", "message_count", "sealed_at_ms", "crc32c", "min_timestamp_ms")
    FILE_TYPE_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    FIRST_MESSAGE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SEALED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    MIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    file_type: FileType
    base_offset: int
    size: int
    first_message_offset: int
    last_message_offset: int
    begin_timestamp_ms: int
    end_timestamp_ms: int
    message_count: int
    sealed_at_ms: int
    crc32c: int
    min_timestamp_ms: int
    def __init__(self, file_type: _Optional[_Union[FileType, str]] = ..., base_offset: _Optional[int] = ..., size: _Optional[int] = ..., first_message_offset: _Optional[int] = ..., last_message_offset: _Optional[int] = ..., begin_timestamp_ms: _Optional[int] = ..., end_timestamp_ms: _Optional[int] = ..., message_count: _Optional[int] = ..., sealed_at_ms: _Optional[int] = ..., crc32c: _Optional[int] = ..., min_timestamp_ms: _Optional[int] = ...) -> None: ...

class FileState(_message.Message):
    __slots__ = ("file_type", "first_base_offset", "first_message_offset", "paged_through", "paged_max_end_timestamp_ms", "last", "tail", "appended_count", "pages_written", "last_page_hash")
    FILE_TYPE_FIELD_NUMBER: _ClassVar[int]
    FIRST_BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FIRST_MESSAGE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PAGED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    PAGED_MAX_END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    APPENDED_COUNT_FIELD_NUMBER: _ClassVar[int]
    PAGES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    LAST_PAGE_HASH_FIELD_NUMBER: _ClassVar[int]
    file_type: FileType
    first_base_offset: int
    first_message_offset: int
    paged_through: int
    paged_max_end_timestamp_ms: int
    last: SegmentRecord
    tail: _containers.RepeatedCompositeFieldContainer[SegmentRecord]
    appended_count: int
    pages_written: int
    last_page_hash: int
    def __init__(self, file_type: _Optional[_Union[FileType, str]] = ..., first_base_offset: _Optional[int] = ..., first_message_offset: _Optional[int] = ..., paged_through: _Optional[int] = ..., paged_max_end_timestamp_ms: _Optional[int] = ..., last: _Optional[_Union[SegmentRecord, _Mapping]] = ..., tail: _Optional[_Iterable[_Union[SegmentRecord, _Mapping]]] = ..., appended_count: _Optional[int] = ..., pages_written: _Optional[int] = ..., last_page_hash: _Optional[int] = ...) -> None: ...

class QueueHead(_message.Message):
    __slots__ = ("format_version", "version", "writer_id", "session_id", "written_at_ms", "page_size", "files", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    version: int
    writer_id: str
    session_id: str
    written_at_ms: int
    page_size: int
    files: _containers.RepeatedCompositeFieldContainer[FileState]
    properties: _containers.ScalarMap[str, str]
    def __init__(self, format_version: _Optional[int] = ..., version: _Optional[int] = ..., writer_id: _Optional[str] = ..., session_id: _Optional[str] = ..., written_at_ms: _Optional[int] = ..., page_size: _Optional[int] = ..., files: _Optional[_Iterable[_Union[FileState, _Mapping]]] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class MetadataPage(_message.Message):
    __slots__ = ("format_version", "file_type", "records")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    FILE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    file_type: FileType
    records: _containers.RepeatedCompositeFieldContainer[SegmentRecord]
    def __init__(self, format_version: _Optional[int] = ..., file_type: _Optional[_Union[FileType, str]] = ..., records: _Optional[_Iterable[_Union[SegmentRecord, _Mapping]]] = ...) -> None: ...
