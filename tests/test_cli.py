"""The ``tuplemesh`` command as a user runs it: real subprocesses, exit codes, messages."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli
from tuplemesh.config import Config

ROOT = Path(__file__).resolve().parents[1]


#: What the summary reports as refused or lost, in every mode (a clean run has none).
LOSSES = (
    "lost", "stranded", "lost_on_close", "unknown_task", "undeliverable",
    "rejected_batches", "rejected_frames", "sequence_gaps",
)  # fmt: skip


def tuplemesh(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"WORDCOUNT_REPEAT": "200", **(env or {})}, timeout=timeout)


def test_run_wordcount_json_is_verified():
    out = tuplemesh("run", "examples.wordcount:topology", "--workers", "3", "--transport", "local", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["matched"] is True and summary["completed"] is True
    assert summary["workers"] == 3 and summary["transport"] == "local"
    assert summary["components"]["sentences"]["emitted"] == 200 * 12
    assert summary["components"]["split"]["executed"] == 200 * 12
    words = sum(wordcount_expected(200).values())
    assert summary["components"]["split"]["emitted"] == words
    assert summary["components"]["count"]["executed"] == words
    # The rate is what the bolts executed over the run's duration; the JSON rounds the duration
    # to 0.1 ms and the rate to 0.1 tuple/s, so it lies between the rates of the rounding bounds.
    seconds = summary["seconds"]
    assert 0 < seconds < 120
    executed = 200 * 12 + words
    fastest, slowest = executed / (seconds - 5e-5), executed / (seconds + 5e-5)
    assert slowest - 0.05 <= summary["tuples_per_second"] <= fastest + 0.05
    assert "all counts exact" in summary["message"]
    assert_transfer_consistent(summary)


def test_run_over_grpc_worker_processes_is_verified():
    """The default transport: every worker its own process, talking gRPC on loopback."""
    out = tuplemesh("run", "examples.wordcount:topology", "--workers", "3", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["transport"] == "grpc" and summary["matched"] is True
    assert summary["components"]["count"]["executed"] == sum(wordcount_expected(200).values())
    assert_transfer_consistent(summary)
    # the same loss counts as in local mode (read back from Admin); a clean run has none
    assert summary["components"]["sentences"]["spout_errors"] == 0
    assert summary["components"]["count"]["dropped_on_stop"] == 0


def test_run_over_zmq_worker_processes_is_verified():
    out = tuplemesh("run", "examples.wordcount:topology", "--workers", "3", "--transport", "zmq", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["transport"] == "zmq" and summary["matched"] is True
    assert summary["components"]["count"]["executed"] == sum(wordcount_expected(200).values())
    assert_transfer_consistent(summary)


def assert_transfer_consistent(summary: dict[str, Any]) -> None:
    """What a 3-worker word count of 200 corpus repeats sends between workers.

    Which split task gets which sentences is a random shuffle permutation, so the number of words
    that cross workers is not fixed; the sentences that cross are: shuffle gives each split task
    the same share (whole rounds), so exactly the shares of split tasks on other workers than the
    spout's. Every tuple crosses at most once and is counted once (resends are not tuples sent).
    """
    from examples.wordcount import build
    from tuplemesh.topology import Assignment

    assignment = Assignment.compute(build(200), 3)
    on_worker = assignment.worker_of_task()
    [spout] = assignment.tasks_of("sentences")
    split = assignment.tasks_of("split")
    remote_split = [t for t in split if on_worker[t] != on_worker[spout]]
    sentences_across = 200 * 12 * len(remote_split) // len(split)
    words = sum(wordcount_expected(200).values())
    transfer = summary["transfer"]
    # duplicates: resends discarded by a receiver (a late ack on a loaded machine), not losses
    assert set(transfer) == {*LOSSES, "duplicates", "messages", "batches"}
    assert {loss: transfer[loss] for loss in LOSSES} == dict.fromkeys(LOSSES, 0)  # a clean run has none
    assert sentences_across <= transfer["messages"] <= sentences_across + words
    # a batch carries 1 to topology.transfer.batch.size tuples
    most = Config({})["topology.transfer.batch.size"]
    assert -(-transfer["messages"] // most) <= transfer["batches"] <= transfer["messages"]


def wordcount_expected(repeat: int):
    from examples.wordcount import expected_counts

    return expected_counts(repeat)


def test_run_human_output_and_env_flags():
    out = tuplemesh(
        "run",
        "examples.wordcount:topology",
        "--transport",
        "tuplemesh.transport.local:LocalContext",
        env={"TUPLEMESH_WORKERS": "2"},
    )
    assert out.returncode == 0, out.stderr
    assert "on 2 worker(s) over tuplemesh.transport.local:LocalContext" in out.stdout
    assert "RESULT OK" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "nosuchmodule:topology"], "could not import module 'nosuchmodule'"),
        (["run", "examples.wordcount:nothing"], "has no attribute 'nothing'"),
        (["run", "examples.wordcount:CORPUS"], "is a list, not a Topology"),
        (["run", "examples.wordcount"], "is not of the form 'module:attribute'"),
        (
            ["run", "examples.wordcount:topology", "--transport", "tests.helpers:ListSpout"],
            "is not a transport plugin",
        ),
        (
            ["worker", "examples.wordcount:topology", "--workers", "2", "--peers", "a:1"],
            "--peers lists 1 address",
        ),
        (
            ["worker", "examples.wordcount:topology", "--workers", "2", "--peers", "a:1,b"],
            "entry 1 'b' is not HOST:PORT",
        ),
        (
            ["worker", "examples.wordcount:topology", "--index", "3", "--workers", "2"],
            "--index 3 is out of range",
        ),
        (["run", "examples.wordcount:topology", "--transport", "pigeon"], "unknown value 'pigeon'"),
    ],
)
def test_run_bad_input_exit_2_naming_the_value(args, message):
    out = tuplemesh(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("args", "env", "in_file", "line"),
    [
        (
            ["--workers", "0"],
            {},
            "",
            "config key 'topology.workers' (set by --workers): must be > 0 (got '0')",
        ),
        (
            [],
            {"TUPLEMESH_TOPOLOGY_TRANSFER_BUFFER_SIZE": "1000"},
            "",
            "config key 'topology.transfer.buffer.size' (set by TUPLEMESH_TOPOLOGY_TRANSFER_BUFFER_SIZE): "
            "must be a power of two >= 1 (ring buffers index by mask) (got '1000')",
        ),
        (
            [],
            {},
            "topology.backpressure.enable: maybe\n",
            "config key 'topology.backpressure.enable' (set by {file}): must be a boolean (true/false) "
            "(got 'maybe')",
        ),
    ],
)
def test_a_bad_config_value_is_one_line_and_exit_2(tmp_path, args, env, in_file, line):
    config = tmp_path / "tuplemesh.yaml"
    config.write_text(in_file)
    out = tuplemesh("run", "examples.wordcount:topology", "--config", str(config), *args, env=env)
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["tuplemesh: error: " + line.format(file=config)]


def test_bad_flag_values():
    out = tuplemesh("worker", "examples.wordcount:topology", "--port", "70000")
    assert out.returncode == 2 and "--port must be a port in 1..65535, got 70000" in out.stderr
    out = tuplemesh(
        "run", "examples.wordcount:topology", env={"TUPLEMESH_TOPOLOGY_PRODUCER_BATCH_SIZE": "-3"}
    )
    assert out.returncode == 2 and "'topology.producer.batch.size'" in out.stderr and "-3" in out.stderr


def test_wrong_result_exits_non_zero(tmp_path):
    (tmp_path / "broken_wc.py").write_text(
        "from examples import wordcount\n"
        "class Lossy(wordcount.CountBolt):\n"
        "    def execute(self, tup):\n"
        "        if tup.values[0] != 'the':\n"
        "            super().execute(tup)\n"
        "b = wordcount.build(repeat=20)\n"
        "b.components['count'].__dict__['prototype'] = Lossy()\n"
        "topology = b\n"
    )
    out = tuplemesh(
        "run", "broken_wc:topology", "--json", env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    )
    assert out.returncode == 1
    summary = json.loads(out.stdout)
    assert summary["matched"] is False and "the: got 0 want" in summary["message"]


def test_config_lists_every_key():
    out = tuplemesh("config")
    assert out.returncode == 0
    for key in (
        "topology.executor.receive.buffer.size",
        "TUPLEMESH_TOPOLOGY_TRANSFER_BATCH_SIZE",
        "messaging.transport",
    ):
        assert key in out.stdout


def test_version_prints_the_installed_version_and_how_the_hot_path_runs():
    from importlib import metadata

    from tuplemesh import compiled_modules

    compiled = len(compiled_modules())  # the subprocess inherits this environment
    build = f"compiled: {compiled} modules" if compiled else "pure Python"
    out = tuplemesh("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"tuplemesh {metadata.version('tuplemesh')} ({build})"


def test_bad_log_level_is_one_line_naming_the_value():
    out = tuplemesh("--log-level", "foo", "config")
    assert out.returncode == 2
    assert (
        "--log-level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (any case), got 'foo'" in out.stderr
    )
    assert "Traceback" not in out.stderr
    out = tuplemesh("config", env={"TUPLEMESH_LOG_LEVEL": "loud"})
    assert out.returncode == 2 and "got 'loud'" in out.stderr


@pytest.mark.parametrize(("command", "flags"), [("run", ["--workers"]), ("worker", ["--workers", "--index"]),
                                                ("top", ["--interval", "--config"])])  # fmt: skip
def test_every_flag_has_help(command, flags):
    out = tuplemesh(command, "--help")
    assert out.returncode == 0
    for line in out.stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith("--") and stripped.split()[0].rstrip(",") in flags:
            assert len(stripped.split()) > 2 or "sets" in stripped, line
    for flag in flags:
        assert flag in out.stdout


def test_boolean_flags_have_env_vars():
    out = tuplemesh(
        "run",
        "examples.wordcount:topology",
        "--workers",
        "2",
        "--transport",
        "local",
        env={"TUPLEMESH_JSON": "true"},
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["workers"] == 2
    out = tuplemesh("run", "examples.wordcount:topology", env={"TUPLEMESH_QUIET": "perhaps"})
    assert out.returncode == 2 and "TUPLEMESH_QUIET must be true or false, got 'perhaps'" in out.stderr


@pytest.mark.parametrize(
    ("in_file", "env", "flag", "expected"),
    [
        ("2", {}, None, 2),  # the file beats the key's default
        ("2", {"TUPLEMESH_TOPOLOGY_WORKERS": "4"}, None, 4),  # env beats the file
        ("2", {"TUPLEMESH_WORKERS": "4"}, None, 4),  # the flag's own env var too
        ("2", {"TUPLEMESH_WORKERS": "4"}, "3", 3),  # the flag given beats them all
        (None, {}, None, 1),  # the key's default, not a flag default
    ],
)
def test_workers_precedence_file_env_flag(tmp_path, in_file, env, flag, expected):
    config = tmp_path / "tuplemesh.yaml"
    config.write_text(f"topology.workers: {in_file}\n" if in_file else "")
    args = ["run", "examples.wordcount:topology", "--transport", "local", "--json", "--config", str(config)]
    out = tuplemesh(*args, *(["--workers", flag] if flag else []), env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["workers"] == expected


def test_help_is_plain_text_listing_the_commands():
    out = tuplemesh("--help")
    assert out.returncode == 0
    assert "``" not in out.stdout and "`" not in out.stdout  # no RST markup
    description = " ".join(out.stdout.split("\n\n")[1].split())
    assert description.startswith("Run Storm-style topologies (spouts and bolts) on a mesh of Python worker")
    assert description.endswith("defaults < config file < environment < the flag on the command line.")
    for command in ("run", "worker", "top", "rebalance", "config"):
        assert re.search(rf"^    {command}\s+\S", out.stdout, re.MULTILINE), command


def test_run_help_shows_the_defaults_and_choices():
    text = " ".join(tuplemesh("run", "--help").stdout.split())
    assert "--workers WORKERS number of workers (default 1, or topology.workers" in text
    assert "--transport TRANSPORT local, grpc, zmq or a MODULE:ATTR plugin (default grpc," in text
    assert "(default 300)" in text and "--serve" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "examples.wordcount:topology", "--worker", "3"], "unrecognized arguments: --worker 3"),
        (["run", "examples.wordcount:topology", "--trans", "local"], "unrecognized arguments: --trans local"),
        (["worker", "examples.wordcount:topology", "--ind", "0"], "unrecognized arguments: --ind 0"),
        (["--log", "INFO", "config"], "argument command: invalid choice: 'INFO'"),  # not --log-level
    ],
)
def test_abbreviated_flags_are_refused(args, message):
    out = tuplemesh(*args)
    assert out.returncode == 2
    assert f"tuplemesh: error: {message}" in out.stderr


def test_a_worker_process_makes_threads_blocked_in_grpc_wake_once_a_second() -> None:
    """gRPC's blocked threads wake every 0.1 s by default: 20 wake-ups a second per peer."""
    from grpc import _common

    from tuplemesh.grpcutil import BLOCKED_THREAD_WAKE_SECONDS, wake_blocked_grpc_threads_less

    default = _common.MAXIMUM_WAIT_TIMEOUT
    assert default == 0.1  # gRPC's own: if a release changes it, look again at what we set
    try:
        wake_blocked_grpc_threads_less()
        assert _common.MAXIMUM_WAIT_TIMEOUT == BLOCKED_THREAD_WAKE_SECONDS == 1.0
    finally:
        _common.MAXIMUM_WAIT_TIMEOUT = default
