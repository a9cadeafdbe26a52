"""The worker's config, typed and in seconds: its queues (`QueueSettings`) and the rest of what
its threads need (`WorkerSettings`). Built once per worker, with its `WorkerPlan`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuplemesh.config import as_config

__all__ = ["QueueSettings", "WorkerSettings"]


@dataclass(frozen=True)
class QueueSettings:
    """The bounded buffers of the data path and how batches fill and leave them. Immutable."""

    receive_buffer_batches: int  # slots of each executor's inbox ring (a power of two)
    receive_max_bytes: int  # payload bytes received and not yet taken, all inboxes; 0: no ceiling
    transfer_max_bytes: int  # serialized bytes held for other workers until acknowledged; 0: none
    transfer_buffer_batches: int  # slots of the worker's transfer ring (a power of two)
    wait_strategy: str  # how threads wait on an empty ring
    wait_timeout_seconds: float  # of the timeout-blocking wait strategy
    wait_yields: int  # GIL hand-overs of a blocking wait strategy before it parks
    producer_batch_tuples: int  # per destination, before an executor publishes a batch
    send_buffer_tuples: int  # in all of an executor's emit buffers, before it flushes them all
    transfer_batch_tuples: int  # in one batch handed to the transport
    max_message_bytes: int  # largest serialized tuple
    flush_interval_seconds: float  # longest wait of a tuple in a partial batch
    backpressure_enabled: bool
    backpressure_watermark: float  # fraction of an inbox in use above which its tasks are congested
    queue_target_seconds: float  # time a batch may wait in an inbox or the transfer ring; 0: slots
    load_aware: bool  # shuffle by its targets' load (tuplemesh.core.target_load); else evenly

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> QueueSettings:
        conf = as_config(conf)
        return cls(
            receive_buffer_batches=conf["topology.executor.receive.buffer.size"],
            receive_max_bytes=conf["topology.receive.max.bytes"],
            transfer_max_bytes=conf["topology.transfer.max.bytes"],
            transfer_buffer_batches=conf["topology.transfer.buffer.size"],
            wait_strategy=conf["topology.disruptor.wait.strategy"],
            wait_timeout_seconds=conf.seconds("topology.disruptor.wait.timeout.millis"),
            wait_yields=conf["topology.disruptor.wait.yields"],
            producer_batch_tuples=conf["topology.producer.batch.size"],
            send_buffer_tuples=conf["topology.executor.send.buffer.size"],
            transfer_batch_tuples=conf["topology.transfer.batch.size"],
            max_message_bytes=conf["messaging.max.message.bytes"],
            flush_interval_seconds=conf.seconds("topology.batch.flush.interval.millis"),
            backpressure_enabled=conf["topology.backpressure.enable"],
            backpressure_watermark=conf["topology.backpressure.watermark"],
            queue_target_seconds=conf.seconds("topology.backpressure.target.ms"),
            load_aware=not conf["topology.disable.loadaware.messaging"],
        )


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker's threads and process need besides the queues. Immutable."""

    serializer: str  # for tuples that cross workers
    spout_wait_seconds: float  # a spout executor's sleep when next_tuple emitted nothing
    shutdown_timeout_seconds: float
    log_interval_seconds: float  # between two lines of a per-tuple warning
    metrics_enabled: bool  # per-batch histograms
    gc_threshold: int  # generation 0; 0 leaves the interpreter's settings
    switch_interval_seconds: float  # the GIL's switch interval; 0 leaves the interpreter's

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> WorkerSettings:
        conf = as_config(conf)
        return cls(
            serializer=conf["topology.tuple.serializer"],
            spout_wait_seconds=conf.seconds("topology.sleep.spout.wait.strategy.time.ms"),
            shutdown_timeout_seconds=conf.seconds("topology.shutdown.timeout.secs"),
            log_interval_seconds=conf.seconds("tuplemesh.log.rate.limit.secs"),
            metrics_enabled=conf["metrics.enabled"],
            gc_threshold=conf["worker.gc.threshold"],
            switch_interval_seconds=conf.seconds("worker.gil.switch.interval.ms"),
        )
