from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PublishRequest(_message.Message):
    __slots__ = ("component", "packed", "rows_json", "batch_id", "partition", "sequence", "packed_columns")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    PACKED_FIELD_NUMBER: _ClassVar[int]
    ROWS_JSON_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PACKED_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    component: str
    packed: bytes
    rows_json: _containers.RepeatedScalarFieldContainer[str]
    batch_id: str
    partition: int
    sequence: int
    packed_columns: bytes
    def __init__(self, component: _Optional[str] = ..., packed: _Optional[bytes] = ..., rows_json: _Optional[_Iterable[str]] = ..., batch_id: _Optional[str] = ..., partition: _Optional[int] = ..., sequence: _Optional[int] = ..., packed_columns: _Optional[bytes] = ...) -> None: ...

class PublishAck(_message.Message):
    __slots__ = ("sequence", "accepted", "duplicate")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    accepted: int
    duplicate: bool
    def __init__(self, sequence: _Optional[int] = ..., accepted: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class PublishOneRequest(_message.Message):
    __slots__ = ("component", "values_json")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    VALUES_JSON_FIELD_NUMBER: _ClassVar[int]
    component: str
    values_json: str
    def __init__(self, component: _Optional[str] = ..., values_json: _Optional[str] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("export", "partition", "start_offset", "max_records", "json", "epoch", "max_bytes", "columns", "arrow")
    EXPORT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ARROW_FIELD_NUMBER: _ClassVar[int]
    export: str
    partition: int
    start_offset: int
    max_records: int
    json: bool
    epoch: int
    max_bytes: int
    columns: bool
    arrow: bool
    def __init__(self, export: _Optional[str] = ..., partition: _Optional[int] = ..., start_offset: _Optional[int] = ..., max_records: _Optional[int] = ..., json: _Optional[bool] = ..., epoch: _Optional[int] = ..., max_bytes: _Optional[int] = ..., columns: _Optional[bool] = ..., arrow: _Optional[bool] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("packed", "count", "next_offset", "end_offset", "records_json", "epoch", "packed_columns", "arrow_ipc")
    PACKED_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PACKED_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ARROW_IPC_FIELD_NUMBER: _ClassVar[int]
    packed: bytes
    count: int
    next_offset: int
    end_offset: int
    records_json: str
    epoch: int
    packed_columns: bytes
    arrow_ipc: bytes
    def __init__(self, packed: _Optional[bytes] = ..., count: _Optional[int] = ..., next_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., records_json: _Optional[str] = ..., epoch: _Optional[int] = ..., packed_columns: _Optional[bytes] = ..., arrow_ipc: _Optional[bytes] = ...) -> None: ...

class OffsetsRequest(_message.Message):
    __slots__ = ("export",)
    EXPORT_FIELD_NUMBER: _ClassVar[int]
    export: str
    def __init__(self, export: _Optional[str] = ...) -> None: ...

class PartitionOffsets(_message.Message):
    __slots__ = ("partition", "start", "end", "epoch")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition: int
    start: int
    end: int
    epoch: int
    def __init__(self, partition: _Optional[int] = ..., start: _Optional[int] = ..., end: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class OffsetsResponse(_message.Message):
    __slots__ = ("partitions", "total_partitions", "fields", "schema")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionOffsets]
    total_partitions: int
    fields: _containers.RepeatedScalarFieldContainer[str]
    schema: str
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionOffsets, _Mapping]]] = ..., total_partitions: _Optional[int] = ..., fields: _Optional[_Iterable[str]] = ..., schema: _Optional[str] = ...) -> None: ...

class CommitRequest(_message.Message):
    __slots__ = ("export", "partition", "offset", "epoch")
    EXPORT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    export: str
    partition: int
    offset: int
    epoch: int
    def __init__(self, export: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class CommitResponse(_message.Message):
    __slots__ = ("start", "epoch")
    START_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    start: int
    epoch: int
    def __init__(self, start: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...
