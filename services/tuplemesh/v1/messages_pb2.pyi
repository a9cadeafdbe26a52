from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskMessage(_message.Message):
    __slots__ = ("task", "payload", "broadcast")
    TASK_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_FIELD_NUMBER: _ClassVar[int]
    task: int
    payload: bytes
    broadcast: bool
    def __init__(self, task: _Optional[int] = ..., payload: _Optional[bytes] = ..., broadcast: _Optional[bool] = ...) -> None: ...

class TransferBatch(_message.Message):
    __slots__ = ("topology_id", "sender", "sequence", "messages", "packed", "session", "ack_requested", "trace_context")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PACKED_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    ACK_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    topology_id: str
    sender: int
    sequence: int
    messages: _containers.RepeatedCompositeFieldContainer[TaskMessage]
    packed: bytes
    session: int
    ack_requested: bool
    trace_context: _containers.ScalarMap[str, str]
    def __init__(self, topology_id: _Optional[str] = ..., sender: _Optional[int] = ..., sequence: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[TaskMessage, _Mapping]]] = ..., packed: _Optional[bytes] = ..., session: _Optional[int] = ..., ack_requested: _Optional[bool] = ..., trace_context: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TransferAck(_message.Message):
    __slots__ = ("sequence", "credit", "unknown_tasks", "duplicates", "congested_tasks", "credit_bytes")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_TASKS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    CONGESTED_TASKS_FIELD_NUMBER: _ClassVar[int]
    CREDIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    credit: int
    unknown_tasks: _containers.RepeatedScalarFieldContainer[int]
    duplicates: int
    congested_tasks: _containers.RepeatedScalarFieldContainer[int]
    credit_bytes: int
    def __init__(self, sequence: _Optional[int] = ..., credit: _Optional[int] = ..., unknown_tasks: _Optional[_Iterable[int]] = ..., duplicates: _Optional[int] = ..., congested_tasks: _Optional[_Iterable[int]] = ..., credit_bytes: _Optional[int] = ...) -> None: ...
