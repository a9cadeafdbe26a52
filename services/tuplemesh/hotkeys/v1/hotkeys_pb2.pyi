from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers

DESCRIPTOR: _descriptor.FileDescriptor

class HotKeysRequest(_message.Message):
    __slots__ = ("component",)
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    component: str
    def __init__(self, component: str | None = ...) -> None: ...

class HotKey(_message.Message):
    __slots__ = ("execute_seconds", "execute_share", "key_json", "tuple_share", "tuples")
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
    def __init__(
        self,
        key_json: str | None = ...,
        tuples: int | None = ...,
        tuple_share: float | None = ...,
        execute_seconds: float | None = ...,
        execute_share: float | None = ...,
    ) -> None: ...

class HotKeyStream(_message.Message):
    __slots__ = (
        "component",
        "error_bound",
        "execute_seconds",
        "keys",
        "skew",
        "source_component",
        "stream",
        "tasks",
        "tuples",
    )
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
    def __init__(
        self,
        component: str | None = ...,
        source_component: str | None = ...,
        stream: str | None = ...,
        tuples: int | None = ...,
        execute_seconds: float | None = ...,
        tasks: int | None = ...,
        error_bound: int | None = ...,
        skew: float | None = ...,
        keys: _Iterable[HotKey | _Mapping] | None = ...,
    ) -> None: ...

class HotKeysResponse(_message.Message):
    __slots__ = ("sample_every", "streams", "top_k", "worker")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_EVERY_FIELD_NUMBER: _ClassVar[int]
    worker: int
    top_k: int
    streams: _containers.RepeatedCompositeFieldContainer[HotKeyStream]
    sample_every: int
    def __init__(
        self,
        worker: int | None = ...,
        top_k: int | None = ...,
        streams: _Iterable[HotKeyStream | _Mapping] | None = ...,
        sample_every: int | None = ...,
    ) -> None: ...
