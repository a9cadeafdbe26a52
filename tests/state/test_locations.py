"""Where checkpoints go when the configuration names no place, and the resume a start logs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from examples.stateful_wordcount import build as build_topology
from examples.wordcount import topology as stateless
from tuplemesh.config import Config
from tuplemesh.state import MemoryStore, SqliteStore
from tuplemesh.state.coordinator import register_attempt
from tuplemesh.state.locations import store_location
from tuplemesh.state.redis import RedisStore
from tuplemesh.state.run_file import RunStateFile
from tuplemesh.state.sqlite import default_sqlite_path

PATH_KEY = "topology.state.sqlite.path"


def test_a_worker_without_a_path_keeps_a_stable_file_under_the_xdg_state_home(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_sqlite_path() == tmp_path / "state" / "tuplemesh" / "state.sqlite"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_sqlite_path() == tmp_path / "home" / ".local" / "state" / "tuplemesh" / "state.sqlite"


def test_a_run_of_a_sqlite_checkpointed_topology_gets_a_fresh_file_removed_at_its_end():
    conf = Config({"messaging.transport": "grpc"})
    first, second = RunStateFile(conf, build_topology()), RunStateFile(conf, build_topology())
    assert first.overrides[PATH_KEY] != second.overrides[PATH_KEY]
    assert first.env == {"TUPLEMESH_TOPOLOGY_STATE_SQLITE_PATH": first.overrides[PATH_KEY]}
    directory = Path(first.overrides[PATH_KEY]).parent
    assert directory.is_dir() and list(directory.iterdir()) == []
    first.close()
    second.close()
    assert not directory.exists()
    first.close()  # again: nothing left to do


@pytest.mark.parametrize(
    ("conf", "stateful"),
    [
        ({"messaging.transport": "grpc", PATH_KEY: "/chosen/state.sqlite"}, True),  # the user's file
        ({"messaging.transport": "local"}, True),  # memory store
        ({"messaging.transport": "grpc", "topology.state.backend": "redis"}, True),
        ({"messaging.transport": "grpc"}, False),  # nothing checkpointed
    ],
)
def test_a_run_keeps_the_configured_place_and_makes_none_it_does_not_need(conf, stateful):
    run = RunStateFile(Config(conf), build_topology() if stateful else stateless)
    assert run.overrides == {} and run.env == {} and run.directory is None


def test_a_start_that_resumes_says_from_which_checkpoint_and_file_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    path = tmp_path / "state.sqlite"
    conf = Config({"topology.state.backend": "sqlite", PATH_KEY: str(path)})
    with caplog.at_level(logging.INFO, logger="tuplemesh.state.locations"):
        assert register_attempt(conf, "resumed") == 1  # nothing committed yet: nothing to say
        assert caplog.records == []
        store = SqliteStore(path)
        store.commit("resumed", 4)
        store.close()
        assert register_attempt(conf, "resumed") == 2
        assert register_attempt(conf, "resumed") == 3  # a rescale in the same process
    first, again = caplog.records
    assert first.levelno == logging.WARNING and again.levelno == logging.INFO
    assert first.getMessage() == (
        f"topology 'resumed' resumes from checkpoint 4 committed in sqlite file {path} (worker "
        "start 2 of this topology); to start from the beginning instead, stop the workers and "
        "remove that file, or set topology.state.sqlite.path to another file"
    )


def test_the_resume_line_names_a_store_that_is_not_a_file_without_its_password():
    redis = RedisStore("redis://user:secret@db.example:6380/2")
    assert store_location(redis)[0] == "redis store redis://db.example:6380/2"
    assert store_location(MemoryStore()) == ("this process's memory store", "use another topology name")
