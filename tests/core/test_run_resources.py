"""RunResources: what a one-off run holds for its features, opened together and closed together."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest

from examples.stateful_wordcount import ReplayableSentenceSpout, StatefulCountBolt
from tuplemesh.config import Config
from tuplemesh.core.run_resources import RunResources
from tuplemesh.topology import Topology, TopologyBuilder

events: list[str] = []


class Part:
    """A run resource that records its close; ``fail`` names what raises."""

    def __init__(self, conf: Mapping[str, Any], topology: Topology, name: str, fail: str = "") -> None:
        if fail == "open":
            events.append(f"open {name} failed")
            raise OSError(f"{name} cannot open")
        self.name = name
        self.fail = fail
        self.overrides = {f"test.{name}": name}
        self.env = {f"TEST_{name.upper()}": name}
        events.append(f"open {name}")

    def close(self) -> None:
        events.append(f"close {self.name}")
        if self.fail == "close":
            raise OSError(f"{self.name} cannot close")


def first(conf: Mapping[str, Any], topology: Topology) -> Part:
    return Part(conf, topology, "first")


def closes_badly(conf: Mapping[str, Any], topology: Topology) -> Part:
    return Part(conf, topology, "second", fail="close")


def opens_badly(conf: Mapping[str, Any], topology: Topology) -> Part:
    return Part(conf, topology, "third", fail="open")


def last(conf: Mapping[str, Any], topology: Topology) -> Part:
    return Part(conf, topology, "last")


def stateful() -> Topology:
    builder = TopologyBuilder("run-resources")
    builder.set_spout("sentences", ReplayableSentenceSpout())
    builder.set_bolt("count", StatefulCountBolt()).shuffle_grouping("sentences")
    return builder.build()


def test_the_registered_state_file_is_named_for_the_run_and_removed_when_it_ends():
    resources = RunResources(Config({}), stateful())
    path = resources.overrides["topology.state.sqlite.path"]
    assert resources.env == {"TUPLEMESH_TOPOLOGY_STATE_SQLITE_PATH": path}
    assert os.path.isdir(os.path.dirname(path))
    resources.close()
    resources.close()  # idempotent
    assert not os.path.exists(os.path.dirname(path))


def test_every_part_is_closed_even_when_one_raises():
    events.clear()
    resources = RunResources(Config({}), stateful(), (first, closes_badly, last))
    assert resources.overrides == {"test.first": "first", "test.second": "second", "test.last": "last"}
    with pytest.raises(OSError, match="second cannot close"):
        resources.close()
    assert events == ["open first", "open second", "open last", "close first", "close second", "close last"]


def test_a_part_that_cannot_open_leaves_none_of_the_others_open():
    events.clear()
    with pytest.raises(OSError, match="third cannot open"):
        RunResources(Config({}), stateful(), (first, opens_badly, last))
    assert events == ["open first", "open third failed", "close first"]
