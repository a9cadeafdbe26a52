"""The topology API: spouts, bolts, streams, groupings, and the task/executor/worker assignment."""

from tuplemesh.topology.assignment import Assignment, ExecutorSpec
from tuplemesh.topology.builder import BoltDeclarer, ComponentSpec, Subscription, Topology, TopologyBuilder
from tuplemesh.topology.columns import Columns
from tuplemesh.topology.components import (
    BasicBolt,
    BatchBolt,
    Bolt,
    BoltCollector,
    ColumnarBolt,
    MetricCounter,
    MetricGauge,
    MetricHistogram,
    OutputFieldsDeclarer,
    Spout,
    SpoutCollector,
    StreamDef,
    TaskContext,
    TaskMetrics,
)
from tuplemesh.topology.context import TopologyContext
from tuplemesh.topology.groupings import CustomStreamGrouping, stable_hash
from tuplemesh.topology.tuple import DEFAULT_STREAM, AnchoredTuple, Fields, Tuple

__all__ = [
    "DEFAULT_STREAM",
    "AnchoredTuple",
    "Assignment",
    "BasicBolt",
    "BatchBolt",
    "Bolt",
    "BoltCollector",
    "BoltDeclarer",
    "ColumnarBolt",
    "Columns",
    "ComponentSpec",
    "CustomStreamGrouping",
    "ExecutorSpec",
    "Fields",
    "MetricCounter",
    "MetricGauge",
    "MetricHistogram",
    "OutputFieldsDeclarer",
    "Spout",
    "SpoutCollector",
    "StreamDef",
    "Subscription",
    "TaskContext",
    "TaskMetrics",
    "Topology",
    "TopologyBuilder",
    "TopologyContext",
    "Tuple",
    "stable_hash",
]
