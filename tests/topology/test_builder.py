"""Topology building: every structural error is found by build(), naming what is wrong."""

from __future__ import annotations

import pytest

from tuplemesh.errors import TopologyError
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder


class TwoStreamSpout(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word", "n"])
        declarer.declare_stream("errors", ["message"])
        declarer.declare_stream("targeted", ["x"], direct=True)


class Sink(Bolt):
    def execute(self, tup):
        pass


def builder() -> TopologyBuilder:
    b = TopologyBuilder("t")
    b.set_spout("src", TwoStreamSpout())
    return b


def test_valid_topology_builds_with_streams_and_groupings():
    b = builder()
    b.set_bolt("a", Sink(), 2, tasks=4).fields_grouping("src", ["word"]).shuffle_grouping("src", "errors")
    b.set_bolt("b", Sink()).direct_grouping("src", "targeted").all_grouping("src")
    t = b.build()
    assert t.components["a"].num_tasks == 4 and t.components["a"].parallelism == 2
    assert [(c, type(g).__name__) for c, g in t.subscribers("src", "default")] == [
        ("a", "FieldsGrouping"),
        ("b", "AllGrouping"),
    ]
    # only declared streams get wire ids; Sink declares none
    assert t.stream_ids() == {("src", "default"): 0, ("src", "errors"): 1, ("src", "targeted"): 2}


def test_fields_grouping_on_undeclared_field():
    b = builder()
    b.set_bolt("a", Sink()).fields_grouping("src", ["colour"])
    with pytest.raises(TopologyError, match=r"'a'.*undeclared field.*colour.*\['word', 'n'\]"):
        b.build()


def test_subscription_to_unknown_component():
    b = builder()
    b.set_bolt("a", Sink()).shuffle_grouping("nope")
    with pytest.raises(TopologyError, match=r"unknown component 'nope'.*known: a, src"):
        b.build()


def test_subscription_to_unknown_stream():
    b = builder()
    b.set_bolt("a", Sink()).shuffle_grouping("src", "warnings")
    with pytest.raises(
        TopologyError, match=r"no stream 'warnings'.*declared: \['default', 'errors', 'targeted'\]"
    ):
        b.build()


def test_zero_tasks_and_zero_parallelism_are_errors():
    b = builder()
    with pytest.raises(TopologyError, match="task count must be an integer >= 1"):
        b.set_bolt("a", Sink(), 1, tasks=0)
    with pytest.raises(TopologyError, match="parallelism must be an integer >= 1"):
        b.set_bolt("b", Sink(), 0)


def test_direct_stream_needs_direct_grouping_and_vice_versa():
    b = builder()
    b.set_bolt("a", Sink()).shuffle_grouping("src", "targeted")
    with pytest.raises(TopologyError, match="stream is direct"):
        b.build()
    b = builder()
    b.set_bolt("a", Sink()).direct_grouping("src", "errors")
    with pytest.raises(TopologyError, match="direct_grouping needs a stream declared with direct=True"):
        b.build()


def test_duplicate_and_reserved_names():
    b = builder()
    with pytest.raises(TopologyError, match="declared twice"):
        b.set_spout("src", TwoStreamSpout())
    with pytest.raises(TopologyError, match="reserved"):
        b.set_bolt("__acker", Sink())


def test_wrong_component_kind():
    b = TopologyBuilder("t")
    with pytest.raises(TopologyError, match="needs a Spout"):
        b.set_spout("s", Sink())  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match="needs a Bolt"):
        b.set_bolt("b", TwoStreamSpout())  # type: ignore[arg-type]


def test_topology_without_spout_or_components():
    with pytest.raises(TopologyError, match="no components"):
        TopologyBuilder("t").build()
    b = TopologyBuilder("t")
    b.set_bolt("b", Sink())
    with pytest.raises(TopologyError, match="no spout"):
        b.build()


def test_bad_stream_declaration_is_a_topology_error():
    class Dup(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare(["a", "a"])

    b = TopologyBuilder("t")
    b.set_spout("s", Dup())
    with pytest.raises(TopologyError, match=r"'s'.*duplicate field"):
        b.build()


def test_parallelism_is_capped_at_task_count():
    b = builder()
    b.set_bolt("a", Sink(), parallelism=5, tasks=2).shuffle_grouping("src")
    assert b.build().components["a"].parallelism == 2
