from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HotKeysRequest(_message.Message):
    __slots__ = ("component",)
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    component: str
    def __init__(self, component: _Optional[str] = ...) -> None: ...

class HotKey(_message.Message):
    __slots__ = ("key_json", "tuples", "tuple_share", "execute_seconds", "execute_share")
    KEY_JSON_FIELD_NUMBER: _ClassVar[int]
    TUPLES_FIELD_NUMBER: _ClassVar[int]
    TUPLE_SHARE_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_SHARE_FIELD_NUMBER: _ClassVar[int]
    key_json: str
    tuples: int
    tuple_share: float
    execute_seconds: float
    execute_share: float
    def __init__(self, key_json: _Optional[str] = ..., tuples: _Optional[int] = ..., tuple_share: _Optional[float] = ..., execute_seconds: _Optional[float] = ..., execute_share: _Optional[float] = ...) -> None: ...

class HotKeyStream(_message.Message):
    __slots__ = ("component", "source_component", "stream", "tuples", "execute_seconds", "tasks", "error_bound", "skew", "keys")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    TUPLES_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    ERROR_BOUND_FIELD_NUMBER: _ClassVar[int]
    SKEW_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    component: str
    source_component: str
    stream: str
    tuples: int
    execute_seconds: float
    tasks: int
    error_bound: int
    skew: float
    keys: _containers.RepeatedCompositeFieldContainer[HotKey]
    def __init__(self, component: _Optional[str] = ..., source_component: _Optional[str] = ..., stream: _Optional[str] = ..., tuples: _Optional[int] = ..., execute_seconds: _Optional[float] = ..., tasks: _Optional[int] = ..., error_bound: _Optional[int] = ..., skew: _Optional[float] = ..., keys: _Optional[_Iterable[_Union[HotKey, _Mapping]]] = ...) -> None: ...

class HotKeysResponse(_message.Message):
    __slots__ = ("worker", "top_k", "streams", "sample_every")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_EVERY_FIELD_NUMBER: _ClassVar[int]
    worker: int
    top_k: int
    streams: _containers.RepeatedCompositeFieldContainer[HotKeyStream]
    sample_every: int
    def __init__(self, worker: _Optional[int] = ..., top_k: _Optional[int] = ..., streams: _Optional[_Iterable[_Union[HotKeyStream, _Mapping]]] = ..., sample_every: _Optional[int] = ...) -> None: ...
