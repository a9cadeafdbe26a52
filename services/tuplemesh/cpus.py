"""CPU lists (``"0"``, ``"2-3"``, ``"0,2-3"``, as Linux writes them) and pinning a worker to one.

Workers that share cores take turns on them: a thread that wakes to hand a batch on waits for a
core another process holds, and each process's threads migrate between cores. A worker that
has cores of its own (``worker.cpus``; ``tuplemesh run`` gives each local worker its share when
there are enough) skips both. On Kubernetes the kubelet does the same for a pod of the Guaranteed class
with whole CPUs under its static CPU manager policy, and the worker needs no setting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable

__all__ = [
    "MAX_CPUS",
    "available",
    "format_cpu_list",
    "own_shares",
    "parse_cpu_list",
    "pin_process",
    "shares",
]


#: One CPU list entry: a CPU or a range of them, in plain decimal.
_ENTRY = re.compile(r"([0-9]+)(?:-([0-9]+))?")
#: Beyond any CPU number Linux gives (its NR_CPUS tops out at 8192): a list reaching further is
#: a mistake, and building the set it names would take memory in proportion.
MAX_CPUS = 1 << 16


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPUs of a list like ``"0,2-3"``; ValueError naming ``text`` when it is not one."""
    cpus: set[int] = set()
    for part in text.split(","):
        entry = _ENTRY.fullmatch(part.strip())
        if entry is None:
            raise ValueError(f"{text!r} is not a CPU list (like 0,2-3)")
        low = int(entry.group(1))
        high = low if entry.group(2) is None else int(entry.group(2))
        if high < low:
            raise ValueError(f"{text!r} is not a CPU list (like 0,2-3): {part.strip()!r} is no range")
        if high >= MAX_CPUS:
            raise ValueError(f"{text!r}: CPU {high} is beyond any CPU Linux numbers (below {MAX_CPUS})")
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """``cpus`` as a CPU list, runs joined: ``{0, 2, 3}`` -> ``"0,2-3"``."""
    parts: list[str] = []
    run: list[int] = []
    for cpu in sorted(set(cpus)):
        if run and cpu != run[-1] + 1:
            parts.append(_run_text(run))
            run = []
        run.append(cpu)
    if run:
        parts.append(_run_text(run))
    return ",".join(parts)


def _run_text(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def shares(workers: int, cpus: Collection[int]) -> list[frozenset[int]]:
    """The CPUs of each of ``workers`` local workers: an even, contiguous share of ``cpus``
    each when there are at least as many CPUs as workers (the first ones take the remainder),
    else one CPU each, round robin. Shares follow the CPU numbers: where those number the
    hyperthreads of one core apart (Linux usually does), two workers' shares may be siblings."""
    ordered = sorted(cpus)
    if not ordered or workers < 1:
        raise ValueError(f"no CPUs to share among {workers} worker(s)")
    if workers > len(ordered):
        return [frozenset({ordered[index % len(ordered)]}) for index in range(workers)]
    each, extra = divmod(len(ordered), workers)
    out, start = [], 0
    for index in range(workers):
        size = each + (1 if index < extra else 0)
        out.append(frozenset(ordered[start : start + size]))
        start += size
    return out


def own_shares(workers: int) -> list[frozenset[int]] | None:
    """What ``tuplemesh run`` gives its workers by default: each its share of this process's
    CPUs (`shares`) when there are at least 2 workers and at least as many CPUs, on a platform
    that can pin; else None, for the OS to place them. Two workers pinned to one CPU could not
    use a core the OS would have given one of them; one worker has every CPU anyway."""
    try:
        cpus = available()
    except ValueError:
        return None
    return shares(workers, cpus) if 2 <= workers <= len(cpus) else None


def available() -> frozenset[int]:
    """The CPUs this process may run on; ValueError where the platform cannot pin (not Linux)."""
    if not hasattr(os, "sched_getaffinity") or not os.path.isdir("/proc/self/task"):
        raise ValueError("this platform cannot pin a process to CPUs (Linux can)")
    return frozenset(os.sched_getaffinity(0))


def pin_process(cpus: Collection[int]) -> None:
    """Run every thread of this process, and every thread it starts from now on, on ``cpus``.
    ValueError naming the CPUs this process may use when ``cpus`` are not among them (not
    online, outside its cgroup, or outside what it was started with: ``taskset``)."""
    allowed = available()
    missing = set(cpus) - allowed
    if not cpus or missing:
        raise ValueError(
            f"worker.cpus {format_cpu_list(cpus) or '(empty)'}: this process may run only on CPUs "
            f"{format_cpu_list(allowed)}"
        )
    # A new thread takes its creator's CPUs, but threads started already keep theirs: set each,
    # and list them again until a pass finds none left over (one may start during a pass).
    done: set[int] = set()
    while True:
        tasks = {int(task) for task in os.listdir("/proc/self/task")} - done
        if not tasks:
            return
        for task in tasks:
            try:
                os.sched_setaffinity(task, cpus)
            except ProcessLookupError:  # a thread that ended meanwhile
                pass
            except OSError as exc:
                raise ValueError(
                    f"worker.cpus {format_cpu_list(cpus)}: the kernel refused them ({exc.strerror or exc})"
                ) from None
            done.add(task)
