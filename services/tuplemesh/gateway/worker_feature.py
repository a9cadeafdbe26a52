"""The Gateway as a worker feature: its registry, its gRPC service and its export counts.

Built for every worker (by the factory ``feature`` of the package), whatever its topology: a
Gateway call for a component the worker does not run is answered NOT_FOUND by name, by every
worker. Written only against the feature interface (tuplemesh.core.feature): the worker names no
part of the Gateway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.core.feature import ExecutorHooks, ExecutorView, FeatureContext, FeatureMetric, FeatureServer
from tuplemesh.core.feature_spec import FeatureSpec
from tuplemesh.gateway.components import ExportBolt
from tuplemesh.gateway.registry import GatewayRegistry, GatewayTask
from tuplemesh.gateway.service import GatewayServicer
from tuplemesh.state.spout import CheckpointedSpout
from tuplemesh.v1 import gateway_pb2_grpc

__all__ = ["FEATURE", "GatewayFeature"]


class GatewayFeature:
    """One worker's Gateway: the registry its IngestSpout and ExportBolt tasks register with, the
    Gateway service over it, and the records its ExportBolt tasks could not export at stop."""

    name = "gateway"

    def __init__(self, context: FeatureContext) -> None:
        self.worker = context.worker
        self.conf = context.conf
        # this worker's alone: handed to its tasks in ``attach``, before any opens or prepares
        self.registry = GatewayRegistry()
        #: this worker's ExportBolt tasks by component, in executor order (their ``lost`` counts)
        self.exports: dict[str, list[ExportBolt]] = {}

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        for task in executor.tasks.values():
            # a checkpointed topology runs each spout inside the checkpoint protocol's wrapper
            user = task.spout if isinstance(task, CheckpointedSpout) else task
            if isinstance(user, GatewayTask):
                user.gateway_registry = self.registry  # the executor opens or prepares it later
        if executor.is_bolt:
            bolts = [task for task in executor.tasks.values() if isinstance(task, ExportBolt)]
            if bolts:
                self.exports.setdefault(executor.component, []).extend(bolts)
        return None  # the data path is the components' own: nothing to wrap

    def serve(self, where: FeatureServer) -> None:
        gateway_pb2_grpc.add_GatewayServicer_to_server(
            GatewayServicer(
                self.registry,
                self.worker,
                accepting=where.accepting,  # a draining worker sends publishers elsewhere
                fetch_max_bytes=self.conf["gateway.fetch.max.bytes"],
                max_message_bytes=self.conf["messaging.max.message.bytes"],
            ),
            where.server,
        )

    def start(self) -> None:
        pass  # no thread: the service runs on the server's, the tasks on their executors'

    def stopping(self) -> None:
        # before the spouts stop: no new rows, and a full export log stops waiting for a reader's
        # commit (nobody may commit once the worker stops), so its bolt drains in time
        self.registry.close()

    def stop(self) -> None:
        self.registry.close()  # idempotent: already closed by ``stopping``

    def section(self) -> Mapping[str, Any]:
        return {}

    def metrics(self) -> Sequence[FeatureMetric]:
        return ()  # its count is the snapshot's ``export_lost``, exported with the worker's own

    def snapshot_fields(self) -> Mapping[str, Any]:
        """``export_lost``: records each ExportBolt component could not export at stop, summed
        over its tasks here (a component with ExportBolt tasks here has an entry, 0 or more)."""
        return {
            "export_lost": {
                component: sum(bolt.lost for bolt in bolts) for component, bolts in self.exports.items()
            }
        }


#: The registry's entry: the Gateway runs in every worker (its service serves the
#: IngestSpouts and ExportBolts the topology has, if any).
FEATURE = FeatureSpec("gateway", build=GatewayFeature)
