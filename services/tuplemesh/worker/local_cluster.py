"""`LocalCluster`: several workers in one process over one shared transport (Storm's local mode)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from tuplemesh.config import Config
from tuplemesh.core.run_resources import RunResources
from tuplemesh.core.stats import WorkerSnapshot
from tuplemesh.core.summary import RunSummary, component_totals, failing_error, mesh_quiescent, summarize
from tuplemesh.netutil import free_ports
from tuplemesh.topology import Topology
from tuplemesh.transport.base import Context
from tuplemesh.worker.assembly import assemble_worker, prepared_context, worker_conf

__all__ = ["LocalCluster", "RunSummary"]

BASE_PORT = 6700  # Storm's first slot port; in local mode ports are only mailbox names


class LocalCluster:
    """Start, run to completion, and stop ``num_workers`` workers of one topology in-process."""

    def __init__(self, topology: Topology, num_workers: int, conf: Config | Mapping[str, Any] | None = None):
        base = conf if isinstance(conf, Config) else Config(dict(conf or {}))
        # a run resumes no earlier run (its own state file unless the conf names one): what the
        # run holds is set below the topology's conf, as the launcher sets it in a worker
        # process's environment
        self.run_resources = RunResources(base.with_topology(topology.conf), topology)
        base = base.with_overrides(self.run_resources.overrides)
        self.topology = topology
        self.num_workers = num_workers
        # each worker's conf and context as a worker process makes them (tuplemesh.worker.assembly);
        # the mesh's size: a network transport takes batches only from workers 0 .. num_workers - 1
        confs = [worker_conf(base, topology, i, num_workers) for i in range(num_workers)]
        self.conf = base.with_topology(topology.conf).with_overrides({"topology.workers": num_workers})
        self.transport = self.conf["messaging.transport"]
        first = prepared_context(confs[0])
        if first.capabilities.in_process:
            # Storm's local mode: one in-process context, ports are only mailbox names.
            self.contexts: list[Context] = [first] * num_workers
            ports = [BASE_PORT + i for i in range(num_workers)]
        else:
            # A network transport: each worker gets its own context and a real loopback port.
            self.contexts = [first, *(prepared_context(c) for c in confs[1:])]
            ports = free_ports(num_workers, self.conf["worker.bind.host"])
        peers = {i: (self.conf["worker.bind.host"], port) for i, port in enumerate(ports)}
        self.workers = [
            assemble_worker(topology, i, num_workers, confs[i], self.contexts[i], port=ports[i], peers=peers)
            for i in range(num_workers)
        ]
        self._started_at = 0.0
        self._finished_at: float | None = None

    def start(self) -> None:
        """Start every worker's executors; spouts begin calling ``next_tuple`` at once."""
        for worker in self.workers:
            worker.start()
        self._started_at = time.monotonic()

    def quiescent(self) -> bool:
        """True when every spout is finished and no tuple is anywhere in flight (`mesh_quiescent`)."""
        return mesh_quiescent(self.snapshots(), self.snapshots)

    def run_until_done(
        self,
        timeout: float,
        poll: float = 0.005,
        tolerated: int | None = None,
        check: Callable[[], None] | None = None,
    ) -> bool:
        """Wait until the topology is quiescent (finite spouts) or ``timeout``; True when done.
        With ``tolerated``, user code raising more exceptions than that (or in prepare/open)
        ends the wait at once, with False. ``check`` is called on every poll; what it raises
        ends the wait (the workers still run: ``stop`` them)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check is not None:
                check()
            if tolerated is not None and failing_error(self.snapshots(), tolerated) is not None:
                return False
            if self.quiescent():
                time.sleep(poll)
                if self.quiescent():  # confirm: nothing started moving again
                    self._finished_at = time.monotonic()
                    return True
            time.sleep(poll)
        return False

    def stop(self) -> bool:
        """Stop the spouts, then every worker, then the transport; True when every worker's
        threads stopped in time."""
        clean = True
        for worker in self.workers:
            worker.deactivate_spouts()
        for worker in self.workers:
            clean &= worker.stop()
        for context in {id(c): c for c in self.contexts}.values():
            context.term()
        self.run_resources.close()
        return clean

    def snapshots(self) -> list[WorkerSnapshot]:
        """Each worker's counters and queue depths, as ``/metrics`` and Admin read them."""
        return [w.snapshot() for w in self.workers]

    def counters(self) -> dict[str, dict[str, int]]:
        """Every executor counter summed by component across the workers."""
        return component_totals(self.snapshots())

    def reports(self) -> dict[str, list[Any]]:
        """Every task's final report by component, in task order (after ``stop``)."""
        merged: dict[str, dict[int, Any]] = {}
        for worker in self.workers:
            for component, by_task in worker.reports().items():
                merged.setdefault(component, {}).update(by_task)
        return {c: [r for _, r in sorted(by_task.items())] for c, by_task in merged.items()}

    def run(
        self, timeout: float, tolerated: int | None = None, check: Callable[[], None] | None = None
    ) -> RunSummary:
        """Start, run to completion (or timeout), stop, check the result. ``tolerated``: the
        user-code exceptions the run survives (``topology.errors.tolerated``); None: any number,
        only counted. ``check``: see ``run_until_done``."""
        self.start()
        completed = self.run_until_done(timeout, tolerated=tolerated, check=check)
        end = self._finished_at if self._finished_at is not None else time.monotonic()
        seconds = end - self._started_at
        self.stop()
        # after stop: what the stop itself lost (stranded, dropped, not exported) is counted too
        snapshots = self.snapshots()
        matched: bool | None = None
        message = "no result check defined"
        if not completed:
            matched, message = False, f"did not complete within {timeout}s"
        elif self.topology.check is not None:
            matched, message = self.topology.check(self.reports())
        return summarize(
            snapshots,
            topology=self.topology.name,
            workers=self.num_workers,
            transport=self.transport,
            seconds=seconds,
            completed=completed,
            matched=matched,
            message=message,
            tolerated=tolerated,
        )
