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
        """Stop the spouts, let what is in flight drain, then stop every worker, then the
        transport; True when every worker's threads stopped in time. The drain and the stops
        share one ``topology.shutdown.timeout.secs``: a bolt that cannot drain costs the stop that
        time once, not once per worker."""
        deadline = time.monotonic() + self.workers[0].settings.shutdown_timeout_seconds
        clean = True
        for worker in self.workers:
            worker.deactivate_spouts()
        # Every worker of the mesh drains at once (a worker stopped first would refuse what the
        # others still send it). Nothing is lost then but what a stuck bolt holds at the deadline.
        clean &= self._drained(deadline)
        for worker in self.workers:
            clean &= worker.stop(max(1.0, deadline - time.monotonic()))
        for context in {id(c): c for c in self.contexts}.values():
            context.term()
        self.run_resources.close()
        return clean

    def _drained(self, deadline: float, poll: float = 0.005) -> bool:
        """Wait until no tuple is in flight anywhere in the mesh (spouts deactivated), or
        ``deadline``; True when it was idle in time. Idle as a whole-mesh stop of worker
        processes finds it (`tuplemesh.server.stopping`): every worker with nothing queued and
        every send acknowledged, the counters the same in two reads in a row, and no more
        deliveries than tuples consumed (a batch between two workers is one, a message for an
        unknown task is consumed with no delivery)."""
        last: tuple[tuple[int, int], ...] | None = None
        while True:
            snapshots = self.snapshots()
            wave = tuple((s.consumed, s.delivered) for s in snapshots)
            if all(s.idle for s in snapshots) and sum(c for c, _ in wave) >= sum(d for _, d in wave):
                if wave == last:
                    return True
                last = wave
            else:
                last = None
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)

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
        self.stop()
        matched: bool | None = None
        message = "no result check defined"
        if not completed:
            matched, message = False, f"did not complete within {timeout}s"
        elif self.topology.check is not None:
            matched, message = self.topology.check(self.reports())
        return self._summary(end, completed, matched, message, tolerated)

    def interrupt(self, signal_name: str, tolerated: int | None = None) -> RunSummary:
        """End a run that a signal (``signal_name``) cut short: stop every worker and sum up
        what was done and what the stop lost; the result is not checked."""
        end = time.monotonic()
        clean = self.stop()
        message = f"interrupted by {signal_name}; workers stopped"
        if not clean:
            message += " (a worker's threads did not stop within topology.shutdown.timeout.secs)"
        summary = self._summary(end, False, None, message, tolerated)
        summary.interrupted = True
        return summary

    def _summary(
        self, end: float, completed: bool, matched: bool | None, message: str, tolerated: int | None
    ) -> RunSummary:
        # taken after stop: what the stop itself lost (stranded, dropped, not exported) is counted
        return summarize(
            self.snapshots(),
            topology=self.topology.name,
            workers=self.num_workers,
            transport=self.transport,
            seconds=end - self._started_at,
            completed=completed,
            matched=matched,
            message=message,
            tolerated=tolerated,
        )
