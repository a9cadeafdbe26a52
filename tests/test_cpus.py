"""Pinning workers to CPUs: the CPU lists, each local worker's share, and real worker processes
that run every thread on their share (read back from /proc), or refuse CPUs they may not use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from examples import wordcount
from tests.helpers import child_pythonpath, eventually, run_cli
from tuplemesh import cpus
from tuplemesh.config import Config
from tuplemesh.cpus import format_cpu_list, own_shares, parse_cpu_list, shares
from tuplemesh.errors import ConfigError
from tuplemesh.launcher import ProcessCluster


def allowed_of(pid: int) -> dict[int, str]:
    """Every thread of process ``pid``: the CPUs it may run on, as the kernel lists them."""
    out = {}
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:  # a thread that ended meanwhile
            continue
        listed = next(line for line in lines if line.startswith("Cpus_allowed_list"))
        out[int(status.parent.name)] = listed.split(":", 1)[1].strip()
    return out


def test_cpu_lists_read_and_write_as_linux_does():
    assert parse_cpu_list("0") == {0}
    assert parse_cpu_list("0,2-3") == {0, 2, 3}
    assert parse_cpu_list(" 4-6 , 1") == {1, 4, 5, 6}
    assert format_cpu_list({0, 2, 3, 5}) == "0,2-3,5"
    assert format_cpu_list([7, 6, 6]) == "6-7"
    bad_lists = (
        ("", ""),
        ("a", ""),
        ("1-", ""),
        ("3-1", ": '3-1' is no range"),
        ("-1", ""),
        ("1_0", ""),
        ("+3", ""),
    )
    for bad, why in bad_lists:
        with pytest.raises(ValueError, match="is not a CPU list") as info:
            parse_cpu_list(bad)
        assert str(info.value).endswith(why)


def test_a_list_beyond_any_cpu_is_refused_before_it_is_built():
    with pytest.raises(ValueError, match="CPU 4294967295 is beyond any CPU Linux numbers"):
        parse_cpu_list("0-4294967295")


def test_local_workers_share_the_cpus_evenly_or_round_robin():
    assert shares(2, [0, 1]) == [{0}, {1}]
    assert shares(2, range(8)) == [{0, 1, 2, 3}, {4, 5, 6, 7}]
    assert shares(3, range(8)) == [{0, 1, 2}, {3, 4, 5}, {6, 7}]
    assert shares(3, [2, 5]) == [{2}, {5}, {2}]  # more workers than CPUs: one each, in turn
    with pytest.raises(ValueError, match="no CPUs"):
        shares(2, [])


def test_by_default_local_workers_are_pinned_only_when_each_can_have_a_cpu_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(cpus, "available", lambda: frozenset(range(4)))
    assert own_shares(2) == [{0, 1}, {2, 3}]
    assert own_shares(4) == [{0}, {1}, {2}, {3}]
    assert own_shares(5) is None  # two on one CPU: the OS may have given one of them another
    assert own_shares(1) is None  # one worker has every CPU anyway

    def cannot_pin() -> frozenset[int]:
        raise ValueError("this platform cannot pin a process to CPUs (Linux can)")

    monkeypatch.setattr(cpus, "available", cannot_pin)
    assert own_shares(2) is None


@pytest.mark.parametrize(
    ("pin_cpus", "env", "expected"),
    [
        (None, {}, "own"),
        (False, {}, None),
        (True, {}, "shares"),
        (None, {"TUPLEMESH_WORKER_CPUS": "0"}, None),  # the user's CPUs, not ours to split
        (None, {"TUPLEMESH_CPUS": "0"}, None),
    ],
)
def test_a_process_cluster_pins_its_workers_as_asked(
    pin_cpus: bool | None, env: dict[str, str], expected: str | None
):
    topology = wordcount.build(repeat=1)
    cluster = ProcessCluster(
        "examples.wordcount:topology", topology, 2, transport="grpc", env=env, pin_cpus=pin_cpus
    )
    try:
        want = {
            "own": own_shares(2),
            "shares": shares(2, os.sched_getaffinity(0)),
            None: None,
        }[expected]
        assert cluster.cpus == want
        if expected == "own" and len(os.sched_getaffinity(0)) >= 2:
            assert cluster.cpus is not None  # on this machine: pinned by default
    finally:
        cluster.stop()


def test_the_config_refuses_a_bad_cpu_list_naming_the_key():
    assert Config({"worker.cpus": "0-1"})["worker.cpus"] == "0-1"
    with pytest.raises(ConfigError, match=r"worker\.cpus") as info:
        Config({"worker.cpus": "one"})
    assert "'one' is not a CPU list" in str(info.value)


def test_pinning_moves_the_threads_already_running_and_those_started_later():
    cpu = min(os.sched_getaffinity(0))
    script = textwrap.dedent(
        f"""
        import json, os, threading
        from tuplemesh.cpus import pin_process
        stop = threading.Event()
        before = [threading.Thread(target=stop.wait) for _ in range(3)]
        for t in before: t.start()
        pin_process({{{cpu}}})
        after = threading.Thread(target=stop.wait); after.start()
        print(json.dumps(sorted(os.listdir("/proc/self/task"))), flush=True)
        input()
        stop.set()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": child_pythonpath()},
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        tasks = json.loads(proc.stdout.readline())
        assert len(tasks) == 5  # the main thread, 3 started before pinning, 1 after
        assert allowed_of(proc.pid) == {int(task): str(cpu) for task in tasks}
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(30) == 0
    finally:
        proc.kill()


def test_a_worker_refuses_cpus_it_may_not_use_and_names_them():
    allowed = format_cpu_list(os.sched_getaffinity(0))
    out = run_cli("worker", "examples.wordcount:topology", "--cpus", "4096", timeout=60)
    assert out.returncode == 2, out.stderr
    assert f"worker.cpus 4096: this process may run only on CPUs {allowed}" in out.stderr
    out = run_cli("worker", "examples.wordcount:topology", "--cpus", "x-1", timeout=60)
    assert out.returncode == 2 and "'x-1' is not a CPU list" in out.stderr, out.stderr


def test_run_pin_cpus_needs_worker_processes():
    out = run_cli("run", "examples.wordcount:topology", "--transport", "local", "--pin-cpus", timeout=60)
    assert out.returncode == 2, out.stderr
    assert "--pin-cpus needs worker processes" in out.stderr


def test_pinned_worker_processes_run_every_thread_on_their_share_and_count_exactly():
    topology = wordcount.build(repeat=20)
    cluster = ProcessCluster("examples.wordcount:topology", topology, 2, transport="grpc", pin_cpus=True)
    expected = [format_cpu_list(share) for share in shares(2, os.sched_getaffinity(0))]
    try:
        cluster.start()
        cluster.wait_serving(60)
        # threads started once serving (the streams' to peers) take the worker's CPUs too
        eventually(lambda: all(s.delivered > 0 for s in cluster.statuses()), timeout=60, message="emitting")
        for proc, share in zip(cluster.procs, expected, strict=True):
            threads = allowed_of(proc.pid)
            assert len(threads) > 5  # gRPC's, the executors', the transfer thread, ...
            assert set(threads.values()) == {share}
    finally:
        cluster.stop()


@pytest.mark.parametrize(
    ("flags", "env", "pinned"),
    [
        (["--pin-cpus"], {}, "always"),
        ([], {}, "by default"),
        (["--no-pin-cpus"], {}, "never"),
        ([], {"TUPLEMESH_PIN_CPUS": "false"}, "never"),
    ],
)
def test_run_places_its_workers_as_asked_names_their_cpus_and_counts_exactly(
    flags: list[str], env: dict[str, str], pinned: str
):
    out = run_cli(
        "run",
        "examples.wordcount:topology",
        "--workers",
        "2",
        *flags,
        "--json",
        env={"WORDCOUNT_REPEAT": "200", **env},
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert (summary["completed"], summary["matched"]) == (True, True), summary["message"]
    cpus = {
        "always": shares(2, os.sched_getaffinity(0)),
        "by default": own_shares(2),
        "never": None,
    }[pinned]
    lines = [line for line in out.stderr.splitlines() if line.startswith("worker ") and " admin " in line]
    assert len(lines) == 2, out.stderr
    for index, line in enumerate(lines):
        assert line.startswith(f"worker {index}: admin "), line
        if cpus is None:
            assert ", CPUs" not in line, line
        else:
            assert line.endswith(f"/metrics, CPUs {format_cpu_list(cpus[index])}"), line
