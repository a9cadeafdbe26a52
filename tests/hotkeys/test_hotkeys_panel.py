"""The hot keys' panel in the UI's view: from the hot-keys feature's real section (as its
Admin/HotKeys answers it), merged across workers; absent where no worker answers with them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.helpers import ListSpout
from tests.hotkeys.topologies import Count
from tests.ui.test_view_and_server import stats
from tuplemesh.core.feature import FeatureContext
from tuplemesh.hotkeys.feature import HotKeys
from tuplemesh.hotkeys.panel import KEY_TEXT_LIMIT, PANEL, key_text, merge_hot_keys
from tuplemesh.hotkeys.service import hot_keys_message
from tuplemesh.hotkeys.v1 import hotkeys_pb2
from tuplemesh.topology import Fields, TopologyBuilder, Tuple
from tuplemesh.ui.graph import topology_graph
from tuplemesh.ui.mesh import EpochHistory, PanelSource, WorkerMeshView
from tuplemesh.ui.view import ViewBuilder

FIELDS = Fields(["word"])


def topology() -> Any:
    b = TopologyBuilder("keys")
    b.set_spout("words", ListSpout([], ["word"]))
    b.set_bolt("count", Count(), parallelism=2).fields_grouping("words", ["word"])
    return b.build()


@dataclass
class Executor:
    """What the feature sees of one executor (tuplemesh.core.feature.ExecutorView)."""

    component: str
    name: str
    task_ids: tuple[int, ...]
    is_bolt: bool = True


def section(words: dict[str, int], top_k: int = 3, capacity_keys: int | None = None) -> dict[str, Any]:
    """The section (keys allowed out) after ``count``'s one executor (2 tasks) executed ``words``."""
    feature = HotKeys(FeatureContext(topology(), {}, 0, "t"), top_k=top_k, sample_every=1, allowed=True)
    hooks = feature.attach(Executor("count", "count-0", (1, 2)))
    assert hooks is not None and hooks.wrap_execute is not None
    execute = hooks.wrap_execute(1, lambda tup: None)
    for word, n in words.items():
        for _ in range(n):
            execute(Tuple([word], 0, "words", "default", FIELDS))
    return dict(feature.section())


def test_the_view_lists_each_components_top_keys_with_exact_counts_shares_and_skew() -> None:
    graph = topology_graph(topology())
    answer = hot_keys_message(0, section({"hot": 60, "<script>x</script>": 25, "ant": 10, "bee": 5}))
    view = ViewBuilder().view({"a": stats(0, 1, 0.1, [])}, {}, graph, panels=[(PANEL, {"a": answer})])
    hot = view["components"]["count"]["hot_keys"]
    (stream,) = hot["streams"]
    assert [(k["key"], k["tuples"], k["tuple_share"]) for k in stream["keys"]] == [
        ("hot", 60, 0.6),
        ("<script>x</script>", 25, 0.25),
        ("ant", 10, 0.1),
    ]  # top 3: "bee" is left out
    assert all(0 <= k["execute_share"] <= 1 for k in stream["keys"])
    assert not any(k["key_truncated"] for k in stream["keys"])
    assert (stream["source_component"], stream["stream"], stream["tuples"], stream["tasks"]) == (
        "words",
        "default",
        100,
        2,
    )
    assert (stream["error_bound"], stream["sample_every"], stream["workers"]) == (0, 1, [0])
    assert stream["skew"] == hot["skew"] == 0.6 * 2
    # the other components have none: no entry, not an empty one
    assert [name for name, c in view["components"].items() if "hot_keys" in c] == ["count"]
    json.dumps(view)  # what the page is sent


def test_without_an_answer_there_is_no_hot_keys_entry() -> None:
    graph = topology_graph(topology())
    for panels in ([], [(PANEL, {})], [(PANEL, {"a": None})]):
        view = ViewBuilder().view({"a": stats(0, 1, 0.1, [])}, {}, graph, panels=panels)
        assert all("hot_keys" not in c for c in view["components"].values())
    # a worker that is down shows none of its last answer
    answer = hot_keys_message(0, section({"hot": 3}))
    view = ViewBuilder().view({"a": None}, {"a": "UNAVAILABLE: down"}, graph, panels=[(PANEL, {"a": answer})])
    assert all("hot_keys" not in c for c in view["components"].values())


def test_two_workers_answers_merge_into_the_meshs_top_keys() -> None:
    one = hot_keys_message(0, section({"hot": 60, "ant": 10}))
    two = hot_keys_message(1, section({"bee": 20, "cat": 10}))
    (stream,) = merge_hot_keys([one, two])["count"]["streams"]
    assert [(k["key"], k["tuples"], k["tuple_share"]) for k in stream["keys"]] == [
        ("hot", 60, 0.6),
        ("bee", 20, 0.2),
        ("ant", 10, 0.1),
    ]
    assert (stream["tuples"], stream["tasks"], stream["workers"]) == (100, 4, [0, 1])
    assert stream["skew"] == 0.6 * 4


def test_a_sketch_past_its_capacity_reports_its_error_bound() -> None:
    # top 1 keeps 32 keys: 60 distinct keys purge, and the bound says by how much counts may be low
    words = {"hot": 50, **{f"k{i}": 1 for i in range(60)}}
    answer = hot_keys_message(0, section(words, top_k=1))
    (stream,) = merge_hot_keys([answer])["count"]["streams"]
    assert stream["error_bound"] == answer.streams[0].error_bound > 0
    (top,) = stream["keys"]
    assert top["key"] == "hot" and 50 - stream["error_bound"] <= top["tuples"] <= 50


def test_keys_read_as_their_text_and_long_ones_are_cut_in_the_view() -> None:
    assert key_text('"hot"') == "hot"
    assert key_text('[1, "a"]') == '[1, "a"]'
    assert key_text("7") == "7"
    long = "x" * (KEY_TEXT_LIMIT + 50)
    answer = hot_keys_message(0, section({long: 2}))
    (key,) = merge_hot_keys([answer])["count"]["streams"][0]["keys"]
    assert (key["key"], key["key_truncated"], key["tuples"]) == ("x" * KEY_TEXT_LIMIT, True, 2)


def test_a_workers_page_shows_its_own_and_its_peers_hot_keys() -> None:
    own = hot_keys_message(0, section({"hot": 6}))
    peer = hot_keys_message(1, section({"ant": 2}))
    asked: list[float] = []

    def peer_hot_keys(timeout: float) -> Any:
        asked.append(timeout)
        return lambda: {1: peer}

    source = WorkerMeshView(
        0,
        lambda: stats(0, 1, 0.1, []),
        lambda timeout: {1: stats(1, 1, 0.1, []).status},
        lambda: {0: ("127.0.0.1", 1), 1: ("127.0.0.1", 2)},
        topology_graph(topology()),
        EpochHistory(),
        "127.0.0.1:1",
        panels=[PanelSource(PANEL, lambda: own, peer_hot_keys)],
    )
    (stream,) = source.view()["components"]["count"]["hot_keys"]["streams"]
    assert [(k["key"], k["tuples"]) for k in stream["keys"]] == [("hot", 6), ("ant", 2)]
    assert stream["workers"] == [0, 1] and len(asked) == 1
    # without the panel (key counting or Admin/HotKeys off): no entry
    plain = WorkerMeshView(
        0,
        lambda: stats(0, 1, 0.1, []),
        lambda timeout: {1: stats(1, 1, 0.1, []).status},
        lambda: {0: ("127.0.0.1", 1), 1: ("127.0.0.1", 2)},
        topology_graph(topology()),
        EpochHistory(),
        "127.0.0.1:1",
    )
    assert all("hot_keys" not in c for c in plain.view()["components"].values())


def test_an_admin_answer_lists_what_the_section_holds() -> None:
    answer = hot_keys_message(3, section({"hot": 2, "ant": 1}))
    assert isinstance(answer, hotkeys_pb2.HotKeysResponse)
    assert (answer.worker, answer.top_k, answer.sample_every) == (3, 3, 1)
    assert [(json.loads(k.key_json), k.tuples) for k in answer.streams[0].keys] == [("hot", 2), ("ant", 1)]
