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
    __slots__ = ("name", "component", "tasks", "spout", "emitted", "executed", "received", "acked", "failed", "errors", "delivered", "finished", "timed_out", "deserialize_errors", "dropped_on_stop", "spout_errors", "execute_seconds", "inbox_wait", "alignment", "first_error", "abandoned_on_halt", "backpressure_holds", "backpressure_hold_seconds")
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
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    DESERIALIZE_ERRORS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_ON_STOP_FIELD_NUMBER: _ClassVar[int]
    SPOUT_ERRORS_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    INBOX_WAIT_FIELD_NUMBER: _ClassVar[int]
    ALIGNMENT_FIELD_NUMBER: _ClassVar[int]
    FIRST_ERROR_FIELD_NUMBER: _ClassVar[int]
    ABANDONED_ON_HALT_FIELD_NUMBER: _ClassVar[int]
    BACKPRESSURE_HOLDS_FIELD_NUMBER: _ClassVar[int]
    BACKPRESSURE_HOLD_SECONDS_FIELD_NUMBER: _ClassVar[int]
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
    timed_out: int
    deserialize_errors: int
    dropped_on_stop: int
    spout_errors: int
    execute_seconds: Histogram
    inbox_wait: Histogram
    alignment: AlignmentStatus
    first_error: UserError
    abandoned_on_halt: int
    backpressure_holds: int
    backpressure_hold_seconds: float
    def __init__(self, name: _Optional[str] = ..., component: _Optional[str] = ..., tasks: _Optional[_Iterable[int]] = ..., spout: _Optional[bool] = ..., emitted: _Optional[int] = ..., executed: _Optional[int] = ..., received: _Optional[int] = ..., acked: _Optional[int] = ..., failed: _Optional[int] = ..., errors: _Optional[int] = ..., delivered: _Optional[int] = ..., finished: _Optional[bool] = ..., timed_out: _Optional[int] = ..., deserialize_errors: _Optional[int] = ..., dropped_on_stop: _Optional[int] = ..., spout_errors: _Optional[int] = ..., execute_seconds: _Optional[_Union[Histogram, _Mapping]] = ..., inbox_wait: _Optional[_Union[Histogram, _Mapping]] = ..., alignment: _Optional[_Union[AlignmentStatus, _Mapping]] = ..., first_error: _Optional[_Union[UserError, _Mapping]] = ..., abandoned_on_halt: _Optional[int] = ..., backpressure_holds: _Optional[int] = ..., backpressure_hold_seconds: _Optional[float] = ...) -> None: ...

class UserError(_message.Message):
    __slots__ = ("component", "task", "method", "type", "message", "worker", "at")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    component: str
    task: int
    method: str
    type: str
    message: str
    worker: int
    at: float
    def __init__(self, component: _Optional[str] = ..., task: _Optional[int] = ..., method: _Optional[str] = ..., type: _Optional[str] = ..., message: _Optional[str] = ..., worker: _Optional[int] = ..., at: _Optional[float] = ...) -> None: ...

class AlignmentStatus(_message.Message):
    __slots__ = ("stale_dropped", "alignments_given_up", "parts_stored", "parts_failed", "held_max")
    STALE_DROPPED_FIELD_NUMBER: _ClassVar[int]
    ALIGNMENTS_GIVEN_UP_FIELD_NUMBER: _ClassVar[int]
    PARTS_STORED_FIELD_NUMBER: _ClassVar[int]
    PARTS_FAILED_FIELD_NUMBER: _ClassVar[int]
    HELD_MAX_FIELD_NUMBER: _ClassVar[int]
    stale_dropped: int
    alignments_given_up: int
    parts_stored: int
    parts_failed: int
    held_max: int
    def __init__(self, stale_dropped: _Optional[int] = ..., alignments_given_up: _Optional[int] = ..., parts_stored: _Optional[int] = ..., parts_failed: _Optional[int] = ..., held_max: _Optional[int] = ...) -> None: ...

class CheckpointStatus(_message.Message):
    __slots__ = ("attempt", "rollbacks", "committed", "abandoned", "store_errors", "last_committed", "last_duration_seconds")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ROLLBACKS_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    ABANDONED_FIELD_NUMBER: _ClassVar[int]
    STORE_ERRORS_FIELD_NUMBER: _ClassVar[int]
    LAST_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    LAST_DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    rollbacks: int
    committed: int
    abandoned: int
    store_errors: int
    last_committed: int
    last_duration_seconds: float
    def __init__(self, attempt: _Optional[int] = ..., rollbacks: _Optional[int] = ..., committed: _Optional[int] = ..., abandoned: _Optional[int] = ..., store_errors: _Optional[int] = ..., last_committed: _Optional[int] = ..., last_duration_seconds: _Optional[float] = ...) -> None: ...

class Histogram(_message.Message):
    __slots__ = ("bounds", "counts", "sum")
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    bounds: _containers.RepeatedScalarFieldContainer[float]
    counts: _containers.RepeatedScalarFieldContainer[int]
    sum: float
    def __init__(self, bounds: _Optional[_Iterable[float]] = ..., counts: _Optional[_Iterable[int]] = ..., sum: _Optional[float] = ...) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("worker", "address", "state", "sent_batches", "unacked_batches", "reconnects", "resent_batches", "channel_state", "sent_tuples", "sent_bytes", "retargets", "lost_on_close", "unknown_tasks", "transferred_tuples", "transferred_batches", "unacked_tuples", "unacked_bytes", "window_waits", "window_wait_seconds", "window_limit_tuples", "coalesced_batches", "granted_bytes", "window_limit_bytes")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SENT_BATCHES_FIELD_NUMBER: _ClassVar[int]
    UNACKED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    RECONNECTS_FIELD_NUMBER: _ClassVar[int]
    RESENT_BATCHES_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_STATE_FIELD_NUMBER: _ClassVar[int]
    SENT_TUPLES_FIELD_NUMBER: _ClassVar[int]
    SENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    RETARGETS_FIELD_NUMBER: _ClassVar[int]
    LOST_ON_CLOSE_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_TASKS_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_TUPLES_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    UNACKED_TUPLES_FIELD_NUMBER: _ClassVar[int]
    UNACKED_BYTES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_WAITS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_LIMIT_TUPLES_FIELD_NUMBER: _ClassVar[int]
    COALESCED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    GRANTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    worker: int
    address: str
    state: str
    sent_batches: int
    unacked_batches: int
    reconnects: int
    resent_batches: int
    channel_state: str
    sent_tuples: int
    sent_bytes: int
    retargets: int
    lost_on_close: int
    unknown_tasks: int
    transferred_tuples: int
    transferred_batches: int
    unacked_tuples: int
    unacked_bytes: int
    window_waits: int
    window_wait_seconds: float
    window_limit_tuples: int
    coalesced_batches: int
    granted_bytes: int
    window_limit_bytes: int
    def __init__(self, worker: _Optional[int] = ..., address: _Optional[str] = ..., state: _Optional[str] = ..., sent_batches: _Optional[int] = ..., unacked_batches: _Optional[int] = ..., reconnects: _Optional[int] = ..., resent_batches: _Optional[int] = ..., channel_state: _Optional[str] = ..., sent_tuples: _Optional[int] = ..., sent_bytes: _Optional[int] = ..., retargets: _Optional[int] = ..., lost_on_close: _Optional[int] = ..., unknown_tasks: _Optional[int] = ..., transferred_tuples: _Optional[int] = ..., transferred_batches: _Optional[int] = ..., unacked_tuples: _Optional[int] = ..., unacked_bytes: _Optional[int] = ..., window_waits: _Optional[int] = ..., window_wait_seconds: _Optional[float] = ..., window_limit_tuples: _Optional[int] = ..., coalesced_batches: _Optional[int] = ..., granted_bytes: _Optional[int] = ..., window_limit_bytes: _Optional[int] = ...) -> None: ...

class BindingStatus(_message.Message):
    __slots__ = ("received_batches", "received_tuples", "received_bytes", "received_tuples_from", "received_bytes_from", "rejected_batches", "rejected_frames", "sequence_gaps", "broadcast_messages", "shutdown_messages", "epoch_refused_batches", "refused")
    class ReceivedTuplesFromEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class ReceivedBytesFromEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class RefusedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RECEIVED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_TUPLES_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_TUPLES_FROM_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_BYTES_FROM_FIELD_NUMBER: _ClassVar[int]
    REJECTED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FRAMES_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_GAPS_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    EPOCH_REFUSED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    received_batches: int
    received_tuples: int
    received_bytes: int
    received_tuples_from: _containers.ScalarMap[int, int]
    received_bytes_from: _containers.ScalarMap[int, int]
    rejected_batches: int
    rejected_frames: int
    sequence_gaps: int
    broadcast_messages: int
    shutdown_messages: int
    epoch_refused_batches: int
    refused: _containers.ScalarMap[str, int]
    def __init__(self, received_batches: _Optional[int] = ..., received_tuples: _Optional[int] = ..., received_bytes: _Optional[int] = ..., received_tuples_from: _Optional[_Mapping[int, int]] = ..., received_bytes_from: _Optional[_Mapping[int, int]] = ..., rejected_batches: _Optional[int] = ..., rejected_frames: _Optional[int] = ..., sequence_gaps: _Optional[int] = ..., broadcast_messages: _Optional[int] = ..., shutdown_messages: _Optional[int] = ..., epoch_refused_batches: _Optional[int] = ..., refused: _Optional[_Mapping[str, int]] = ...) -> None: ...

class DiscoveryStatus(_message.Message):
    __slots__ = ("relists", "watch_restarts", "api_errors", "endpoint_problems")
    RELISTS_FIELD_NUMBER: _ClassVar[int]
    WATCH_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    API_ERRORS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    relists: int
    watch_restarts: int
    api_errors: int
    endpoint_problems: int
    def __init__(self, relists: _Optional[int] = ..., watch_restarts: _Optional[int] = ..., api_errors: _Optional[int] = ..., endpoint_problems: _Optional[int] = ...) -> None: ...

class WorkerStatus(_message.Message):
    __slots__ = ("topology", "worker", "workers", "uptime_seconds", "transport", "state", "executors", "peers", "consumed", "delivered", "unknown_task_messages", "duplicate_batches", "spouts_finished", "reports_json", "transferred_tuples", "lost_tuples", "transferred_batches", "idle", "queues", "stranded_tuples", "transfer_retargets", "received_messages", "undeliverable_messages", "overflow_batches", "export_lost", "discovery", "binding", "injected", "local_queues_empty", "batch_sizes", "checkpoints", "epoch", "congested_tasks", "tasks", "congested_task_ids", "receive_held_bytes", "receive_held_bytes_capacity", "receive_ceiling_waits", "receive_ceiling_wait_seconds", "transfer_held_bytes", "transfer_held_bytes_capacity", "transfer_ceiling_waits", "transfer_ceiling_wait_seconds", "rss_bytes", "spouts_quiet", "feature_sections_json")
    class ExportLostEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
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
    STRANDED_TUPLES_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_RETARGETS_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    UNDELIVERABLE_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OVERFLOW_BATCHES_FIELD_NUMBER: _ClassVar[int]
    EXPORT_LOST_FIELD_NUMBER: _ClassVar[int]
    DISCOVERY_FIELD_NUMBER: _ClassVar[int]
    BINDING_FIELD_NUMBER: _ClassVar[int]
    INJECTED_FIELD_NUMBER: _ClassVar[int]
    LOCAL_QUEUES_EMPTY_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZES_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONGESTED_TASKS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    CONGESTED_TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_HELD_BYTES_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_HELD_BYTES_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_CEILING_WAITS_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_CEILING_WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_HELD_BYTES_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_HELD_BYTES_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_CEILING_WAITS_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_CEILING_WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPOUTS_QUIET_FIELD_NUMBER: _ClassVar[int]
    FEATURE_SECTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
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
    stranded_tuples: int
    transfer_retargets: int
    received_messages: int
    undeliverable_messages: int
    overflow_batches: int
    export_lost: _containers.ScalarMap[str, int]
    discovery: DiscoveryStatus
    binding: BindingStatus
    injected: int
    local_queues_empty: bool
    batch_sizes: Histogram
    checkpoints: CheckpointStatus
    epoch: str
    congested_tasks: int
    tasks: int
    congested_task_ids: _containers.RepeatedScalarFieldContainer[int]
    receive_held_bytes: int
    receive_held_bytes_capacity: int
    receive_ceiling_waits: int
    receive_ceiling_wait_seconds: float
    transfer_held_bytes: int
    transfer_held_bytes_capacity: int
    transfer_ceiling_waits: int
    transfer_ceiling_wait_seconds: float
    rss_bytes: int
    spouts_quiet: bool
    feature_sections_json: str
    def __init__(self, topology: _Optional[str] = ..., worker: _Optional[int] = ..., workers: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., transport: _Optional[str] = ..., state: _Optional[str] = ..., executors: _Optional[_Iterable[_Union[ExecutorStatus, _Mapping]]] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ..., consumed: _Optional[int] = ..., delivered: _Optional[int] = ..., unknown_task_messages: _Optional[int] = ..., duplicate_batches: _Optional[int] = ..., spouts_finished: _Optional[bool] = ..., reports_json: _Optional[str] = ..., transferred_tuples: _Optional[int] = ..., lost_tuples: _Optional[int] = ..., transferred_batches: _Optional[int] = ..., idle: _Optional[bool] = ..., queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ..., stranded_tuples: _Optional[int] = ..., transfer_retargets: _Optional[int] = ..., received_messages: _Optional[int] = ..., undeliverable_messages: _Optional[int] = ..., overflow_batches: _Optional[int] = ..., export_lost: _Optional[_Mapping[str, int]] = ..., discovery: _Optional[_Union[DiscoveryStatus, _Mapping]] = ..., binding: _Optional[_Union[BindingStatus, _Mapping]] = ..., injected: _Optional[int] = ..., local_queues_empty: _Optional[bool] = ..., batch_sizes: _Optional[_Union[Histogram, _Mapping]] = ..., checkpoints: _Optional[_Union[CheckpointStatus, _Mapping]] = ..., epoch: _Optional[str] = ..., congested_tasks: _Optional[int] = ..., tasks: _Optional[int] = ..., congested_task_ids: _Optional[_Iterable[int]] = ..., receive_held_bytes: _Optional[int] = ..., receive_held_bytes_capacity: _Optional[int] = ..., receive_ceiling_waits: _Optional[int] = ..., receive_ceiling_wait_seconds: _Optional[float] = ..., transfer_held_bytes: _Optional[int] = ..., transfer_held_bytes_capacity: _Optional[int] = ..., transfer_ceiling_waits: _Optional[int] = ..., transfer_ceiling_wait_seconds: _Optional[float] = ..., rss_bytes: _Optional[int] = ..., spouts_quiet: _Optional[bool] = ..., feature_sections_json: _Optional[str] = ...) -> None: ...

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
    __slots__ = ("workers", "executors", "epoch", "graph_json")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    GRAPH_JSON_FIELD_NUMBER: _ClassVar[int]
    workers: int
    executors: _containers.RepeatedCompositeFieldContainer[AssignedExecutor]
    epoch: str
    graph_json: str
    def __init__(self, workers: _Optional[int] = ..., executors: _Optional[_Iterable[_Union[AssignedExecutor, _Mapping]]] = ..., epoch: _Optional[str] = ..., graph_json: _Optional[str] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("name", "depth", "capacity", "publish_rate", "published", "limit", "producer_waits", "producer_wait_seconds")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_RATE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_WAITS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    depth: int
    capacity: int
    publish_rate: float
    published: int
    limit: int
    producer_waits: int
    producer_wait_seconds: float
    def __init__(self, name: _Optional[str] = ..., depth: _Optional[int] = ..., capacity: _Optional[int] = ..., publish_rate: _Optional[float] = ..., published: _Optional[int] = ..., limit: _Optional[int] = ..., producer_waits: _Optional[int] = ..., producer_wait_seconds: _Optional[float] = ...) -> None: ...

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
    __slots__ = ("worker", "uptime_seconds", "components", "queues", "status")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    worker: int
    uptime_seconds: float
    components: _containers.RepeatedCompositeFieldContainer[ComponentStats]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    status: WorkerStatus
    def __init__(self, worker: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., components: _Optional[_Iterable[_Union[ComponentStats, _Mapping]]] = ..., queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ..., status: _Optional[_Union[WorkerStatus, _Mapping]] = ...) -> None: ...

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

class WatchTuplesRequest(_message.Message):
    __slots__ = ("component", "stream", "sample_rate", "max_per_second", "emitted")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_RATE_FIELD_NUMBER: _ClassVar[int]
    MAX_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    component: str
    stream: str
    sample_rate: float
    max_per_second: float
    emitted: bool
    def __init__(self, component: _Optional[str] = ..., stream: _Optional[str] = ..., sample_rate: _Optional[float] = ..., max_per_second: _Optional[float] = ..., emitted: _Optional[bool] = ...) -> None: ...

class SampledTuple(_message.Message):
    __slots__ = ("component", "task", "source_component", "source_task", "stream", "values_json", "timestamp", "skipped")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SOURCE_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TASK_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    VALUES_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    component: str
    task: int
    source_component: str
    source_task: int
    stream: str
    values_json: str
    timestamp: float
    skipped: int
    def __init__(self, component: _Optional[str] = ..., task: _Optional[int] = ..., source_component: _Optional[str] = ..., source_task: _Optional[int] = ..., stream: _Optional[str] = ..., values_json: _Optional[str] = ..., timestamp: _Optional[float] = ..., skipped: _Optional[int] = ...) -> None: ...

class RebalanceRequest(_message.Message):
    __slots__ = ("workers", "epoch")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    workers: int
    epoch: str
    def __init__(self, workers: _Optional[int] = ..., epoch: _Optional[str] = ...) -> None: ...

class RebalanceResponse(_message.Message):
    __slots__ = ("epoch",)
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: str
    def __init__(self, epoch: _Optional[str] = ...) -> None: ...

class GetEpochHistoryRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EpochRecord(_message.Message):
    __slots__ = ("epoch", "workers", "since_unix_seconds")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    SINCE_UNIX_SECONDS_FIELD_NUMBER: _ClassVar[int]
    epoch: str
    workers: int
    since_unix_seconds: float
    def __init__(self, epoch: _Optional[str] = ..., workers: _Optional[int] = ..., since_unix_seconds: _Optional[float] = ...) -> None: ...

class EpochHistory(_message.Message):
    __slots__ = ("epochs",)
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    epochs: _containers.RepeatedCompositeFieldContainer[EpochRecord]
    def __init__(self, epochs: _Optional[_Iterable[_Union[EpochRecord, _Mapping]]] = ...) -> None: ...
