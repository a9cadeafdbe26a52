from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatusRequest(_message.Message):
    __slots__ = ("include_reports",)
    INCLUDE_REPORTS_FIELD_NUMBER: _ClassVar[int]
    include_reports: bool
    def __init__(self, include_reports: _Optional[bool] = ...) -> None: ...

class ExecutorStatus(_message.Message):
    __slots__ = ("name", "component", "tasks", "spout", "emitted", "executed", "received", "acked", "failed", "errors", "delivered", "finished")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    SPOUT_FIELD_NUMBER: _ClassVar[int]
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    name: str
    component: str
    tasks: _containers.RepeatedScalarFieldContainer[int]
    spout: bool
    emitted: int
    executed: int
    received: int
    acked: int
    failed: int
    errors: int
    delivered: int
    finished: bool
    def __init__(self, name: _Optional[str] = ..., component: _Optional[str] = ..., tasks: _Optional[_Iterable[int]] = ..., spout: _Optional[bool] = ..., emitted: _Optional[int] = ..., executed: _Optional[int] = ..., received: _Optional[int] = ..., acked: _Optional[int] = ..., failed: _Optional[int] = ..., errors: _Optional[int] = ..., delivered: _Optional[int] = ..., finished: _Optional[bool] = ...) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("worker", "address", "state", "sent_batches", "unacked_batches", "reconnects", "resent_batches")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SENT_BATCHES_FIELD_NUMBER: _ClassVar[int]
    UNACKED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    RECONNECTS_FIELD_NUMBER: _ClassVar[int]
    RESENT_BATCHES_FIELD_NUMBER: _ClassVar[int]
    worker: int
    address: str
    state: str
    sent_batches: int
    unacked_batches: int
    reconnects: int
    resent_batches: int
    def __init__(self, worker: _Optional[int] = ..., address: _Optional[str] = ..., state: _Optional[str] = ..., sent_batches: _Optional[int] = ..., unacked_batches: _Optional[int] = ..., reconnects: _Optional[int] = ..., resent_batches: _Optional[int] = ...) -> None: ...

class WorkerStatus(_message.Message):
    __slots__ = ("topology", "worker", "workers", "uptime_seconds", "transport", "state", "executors", "peers", "consumed", "delivered", "unknown_task_messages", "duplicate_batches", "spouts_finished", "reports_json", "transferred_tuples", "lost_tuples", "transferred_batches", "idle", "queues")
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_TASK_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_BATCHES_FIELD_NUMBER: _ClassVar[int]
    SPOUTS_FINISHED_FIELD_NUMBER: _ClassVar[int]
    REPORTS_JSON_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_TUPLES_FIELD_NUMBER: _ClassVar[int]
    LOST_TUPLES_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    IDLE_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    topology: str
    worker: int
    workers: int
    uptime_seconds: float
    transport: str
    state: str
    executors: _containers.RepeatedCompositeFieldContainer[ExecutorStatus]
    peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    consumed: int
    delivered: int
    unknown_task_messages: int
    duplicate_batches: int
    spouts_finished: bool
    reports_json: str
    transferred_tuples: int
    lost_tuples: int
    transferred_batches: int
    idle: bool
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, topology: _Optional[str] = ..., worker: _Optional[int] = ..., workers: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., transport: _Optional[str] = ..., state: _Optional[str] = ..., executors: _Optional[_Iterable[_Union[ExecutorStatus, _Mapping]]] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ..., consumed: _Optional[int] = ..., delivered: _Optional[int] = ..., unknown_task_messages: _Optional[int] = ..., duplicate_batches: _Optional[int] = ..., spouts_finished: _Optional[bool] = ..., reports_json: _Optional[str] = ..., transferred_tuples: _Optional[int] = ..., lost_tuples: _Optional[int] = ..., transferred_batches: _Optional[int] = ..., idle: _Optional[bool] = ..., queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class GetAssignmentRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AssignedExecutor(_message.Message):
    __slots__ = ("index", "component", "tasks", "worker")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    index: int
    component: str
    tasks: _containers.RepeatedScalarFieldContainer[int]
    worker: int
    def __init__(self, index: _Optional[int] = ..., component: _Optional[str] = ..., tasks: _Optional[_Iterable[int]] = ..., worker: _Optional[int] = ...) -> None: ...

class AssignmentInfo(_message.Message):
    __slots__ = ("workers", "executors")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    workers: int
    executors: _containers.RepeatedCompositeFieldContainer[AssignedExecutor]
    def __init__(self, workers: _Optional[int] = ..., executors: _Optional[_Iterable[_Union[AssignedExecutor, _Mapping]]] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("name", "depth", "capacity", "publish_rate")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_RATE_FIELD_NUMBER: _ClassVar[int]
    name: str
    depth: int
    capacity: int
    publish_rate: float
    def __init__(self, name: _Optional[str] = ..., depth: _Optional[int] = ..., capacity: _Optional[int] = ..., publish_rate: _Optional[float] = ...) -> None: ...

class QueueList(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class WatchStatsRequest(_message.Message):
    __slots__ = ("interval_seconds",)
    INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    interval_seconds: float
    def __init__(self, interval_seconds: _Optional[float] = ...) -> None: ...

class ComponentStats(_message.Message):
    __slots__ = ("component", "emitted", "executed", "executed_per_second", "emitted_per_second")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    EMITTED_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    component: str
    emitted: int
    executed: int
    executed_per_second: float
    emitted_per_second: float
    def __init__(self, component: _Optional[str] = ..., emitted: _Optional[int] = ..., executed: _Optional[int] = ..., executed_per_second: _Optional[float] = ..., emitted_per_second: _Optional[float] = ...) -> None: ...

class WorkerStats(_message.Message):
    __slots__ = ("worker", "uptime_seconds", "components", "queues")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    worker: int
    uptime_seconds: float
    components: _containers.RepeatedCompositeFieldContainer[ComponentStats]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, worker: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., components: _Optional[_Iterable[_Union[ComponentStats, _Mapping]]] = ..., queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class EmitRequest(_message.Message):
    __slots__ = ("component", "task", "values_json", "stream", "source_component")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    VALUES_JSON_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SOURCE_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    component: str
    task: int
    values_json: str
    stream: str
    source_component: str
    def __init__(self, component: _Optional[str] = ..., task: _Optional[int] = ..., values_json: _Optional[str] = ..., stream: _Optional[str] = ..., source_component: _Optional[str] = ...) -> None: ...

class EmitResponse(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: int
    def __init__(self, task: _Optional[int] = ...) -> None: ...

class DrainRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DrainResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: str
    def __init__(self, state: _Optional[str] = ...) -> None: ...
