"""The UI's view (from WorkerStats) and its WSGI app, without a browser or a worker."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from tests.ui.topologies import slow_wordcount
from tuplemesh.ui.graph import topology_graph
from tuplemesh.ui.mesh import (
    HISTORY_LIMIT,
    PEER_TIMEOUT,
    EpochHistory,
    WorkerMeshView,
    history_rows,
    merge_histories,
)
from tuplemesh.ui.server import COOKIE, UiApp
from tuplemesh.ui.view import ViewBuilder
from tuplemesh.v1 import admin_pb2


def stats(worker: int, executed: int, execute_sum: float, congested: list[int]) -> admin_pb2.WorkerStats:
    return admin_pb2.WorkerStats(
        worker=worker,
        components=[admin_pb2.ComponentStats(component="audit", executed=executed, executed_per_second=5.0)],
        queues=[admin_pb2.QueueInfo(name="inbox:audit-0", depth=6, capacity=8)],
        status=admin_pb2.WorkerStatus(
            worker=worker,
            workers=2,
            state="SERVING",
            epoch="0/2/abc",
            executors=[
                admin_pb2.ExecutorStatus(
                    name="audit-0",
                    component="audit",
                    tasks=[7],
                    errors=2,
                    execute_seconds=admin_pb2.Histogram(bounds=[1.0], counts=[executed, 0], sum=execute_sum),
                )
            ],
            congested_task_ids=congested,
            export_lost={"audit": 3},
        ),
    )


def test_the_view_sums_workers_maps_congested_tasks_and_shows_the_last_intervals_latency() -> None:
    builder = ViewBuilder()
    graph = topology_graph(slow_wordcount)
    first = builder.view({"a": stats(0, 10, 1.0, []), "b": None}, {"b": "UNAVAILABLE: down"}, graph)
    audit = first["components"]["audit"]
    assert audit["execute_ms"] == 100.0  # 1 s over 10 tuples
    assert (audit["errors"], audit["losses"], audit["backpressured"]) == (2, 3, False)
    assert audit["inbox_fill"] == 0.75
    assert [(w["target"], w["up"]) for w in first["workers"]] == [("a", True), ("b", False)]
    assert first["workers"][1]["error"] == "UNAVAILABLE: down"
    assert set(first["components"]) == {"audit", "count", "sentences", "split"}
    second = builder.view({"a": stats(0, 30, 5.0, [7]), "b": stats(1, 0, 0.0, [])}, {}, graph)
    audit = second["components"]["audit"]
    assert audit["execute_ms"] == 200.0  # (5 - 1) s over 20 new tuples, not 5 s over 30
    assert (audit["backpressured"], audit["congested_tasks"], audit["executed"]) == (True, 1, 30)
    assert audit["executed_per_second"] == 10.0
    assert second["epochs"] == ["0/2/abc"] and second["workers_expected"] == 2


def call(
    app: UiApp, path: str, method: str = "GET", body: bytes = b"", **headers: str
) -> tuple[str, dict[str, str], Any]:
    seen: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(response_headers)

    environ = {
        "PATH_INFO": path,
        "REQUEST_METHOD": method,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        **{f"HTTP_{k.upper()}": v for k, v in headers.items()},
    }
    result = app(environ, start_response)
    return seen["status"], seen["headers"], result


def test_the_token_is_needed_by_page_view_and_events_but_not_the_static_files() -> None:
    app = UiApp(lambda: {"n": 1}, token="t0k")
    for path in ("/ui/", "/ui/view.json", "/ui/events"):
        assert call(app, path)[0] == "401 Unauthorized"
        assert call(app, path, authorization="Bearer nope")[0] == "401 Unauthorized"
    assert call(app, "/ui/app.js")[0] == "200 OK"
    status, _, body = call(app, "/ui/view.json", authorization="Bearer t0k")
    assert (status, json.loads(b"".join(body))) == ("200 OK", {"n": 1})
    status, headers, _ = call(app, "/ui/login", "POST", b"token=wrong")
    assert status == "401 Unauthorized" and "Set-Cookie" not in headers
    status, headers, _ = call(app, "/ui/login", "POST", b"token=t0k")
    assert status == "303 See Other" and headers["Set-Cookie"].startswith(
        f"{COOKIE}=t0k; Path=/ui/; HttpOnly"
    )
    assert call(app, "/ui/", cookie=f"{COOKIE}=t0k")[0] == "200 OK"
    assert call(app, "/ui/nothing")[0] == "404 Not Found"
    odd = UiApp(lambda: {}, token="a b;c=d")
    status, headers, _ = call(odd, "/ui/login", "POST", b"token=a+b%3Bc%3Dd")
    assert headers["Set-Cookie"].startswith(f"{COOKIE}=a%20b%3Bc%3Dd;")
    assert call(odd, "/ui/", cookie=f"{COOKIE}=a%20b%3Bc%3Dd")[0] == "200 OK"


def test_event_streams_are_bounded_share_one_reading_and_end_after_their_timeout() -> None:
    readings = []

    def source() -> dict[str, Any]:
        readings.append(1)
        return {"reading": len(readings)}

    app = UiApp(source, max_clients=2, stream_seconds=0.0)
    first, second = call(app, "/ui/events")[2], call(app, "/ui/events")[2]
    assert next(first) == next(second) == b"retry: 1000\n\n"
    assert next(first) == next(second) == b'data: {"reading":1}\n\n'  # one reading for both
    assert app.clients == 2
    status, headers, _ = call(app, "/ui/events")
    assert status == "503 Service Unavailable" and headers["Retry-After"] == "5"
    assert list(first) == []  # stream_seconds over: the stream ends and frees its slot
    assert app.clients == 1
    assert call(app, "/ui/events")[0] == "200 OK"
    second.close()
    assert app.clients == 0


def peer_status(worker: int, executed: int) -> admin_pb2.WorkerStatus:
    return admin_pb2.WorkerStatus(
        worker=worker,
        workers=3,
        state="SERVING",
        epoch="0/3/abc",
        tasks=1,
        rss_bytes=5 << 20,
        executors=[admin_pb2.ExecutorStatus(name="split-1", component="split", tasks=[3], executed=executed)],
        queues=[admin_pb2.QueueInfo(name="inbox:split-1", depth=2, capacity=8)],
        congested_task_ids=[3],
    )


def test_a_workers_page_shows_every_peer_and_a_silent_one_as_unreachable() -> None:
    own = stats(0, 10, 1.0, [])
    own.status.workers = 3
    answers: dict[int, admin_pb2.WorkerStatus | None] = {1: peer_status(1, 100), 2: None}
    asked: list[float] = []

    def peers(timeout: float) -> dict[int, admin_pb2.WorkerStatus | None]:
        asked.append(timeout)
        return answers

    addresses = {0: ("h", 7000), 1: ("h", 7001), 2: ("h", 7002)}
    history = EpochHistory()
    history.record("0/3/abc", 3, since=100.0)
    clock = iter([10.0, 12.0])
    graph = topology_graph(slow_wordcount)
    source = WorkerMeshView(
        0, lambda: own, peers, lambda: addresses, graph, history, "h:7300", clock.__next__
    )
    view = source.view()
    assert asked == [PEER_TIMEOUT]
    rows = [(w["target"], w.get("worker"), w["up"]) for w in view["workers"]]
    assert rows == [("h:7000", 0, True), ("h:7001", 1, True), ("h:7002", 2, False)]
    peer = view["workers"][1]
    assert (peer["tasks"], peer["congested_tasks"], peer["rss_bytes"], peer["state"]) == (
        1,
        0,
        5 << 20,
        "SERVING",
    )
    assert peer["queues"] == [{"name": "inbox:split-1", "depth": 2, "capacity": 8, "fill": 0.25}]
    assert view["workers"][2]["error"] == "unreachable: no answer to its status within 0.8 s"
    split = view["components"]["split"]
    assert (split["executed"], split["tasks_here"], split["congested_tasks"]) == (100, 1, 1)
    assert split["executed_per_second"] == 0.0  # one answer: no rate yet
    assert view["served_by"] == 0
    assert view["history"] == [{"epoch": "0/3/abc", "workers": 3, "since": 100.0}]
    # worker 2 answers, worker 1 has executed 50 more since; an address discovery lost: down
    answers[1], answers[2] = peer_status(1, 150), peer_status(2, 0)
    del addresses[2]
    second = source.view()
    assert second["components"]["split"]["executed"] == 150
    assert second["components"]["split"]["executed_per_second"] == 25.0  # 50 more in 2 s
    assert [(w["target"], w["up"], w.get("error")) for w in second["workers"]] == [
        ("h:7000", True, None),
        ("h:7001", True, None),
        ("worker 2", False, "unreachable: no known address"),
    ]


def test_peers_are_asked_once_per_refresh_however_many_pages_watch() -> None:
    asked: list[float] = []

    def peers(timeout: float) -> dict[int, admin_pb2.WorkerStatus | None]:
        asked.append(timeout)
        return {1: None}

    source = WorkerMeshView(0, lambda: stats(0, 1, 0.1, []), peers, dict, None, EpochHistory(), "h:1")
    app = UiApp(source.view, max_clients=3, stream_seconds=0.0)
    assert asked == []  # nobody watches: nobody asked
    streams = [call(app, "/ui/events")[2] for _ in range(3)]
    for stream in streams:
        assert next(stream) == b"retry: 1000\n\n"
        view = json.loads(next(stream).removeprefix(b"data: "))
        assert [(w["target"], w["up"]) for w in view["workers"]] == [("h:1", True), ("worker 1", False)]
    assert len(asked) == 1


def test_the_epoch_history_keeps_the_newest_epochs_newest_first() -> None:
    history = EpochHistory(limit=3)
    for counter in range(5):
        history.record(f"{counter}/2/abc", 2 + counter, since=float(counter))
        history.record(f"{counter}/2/abc", 2 + counter, since=99.0)  # the same epoch again: one row
    assert history.rows() == [
        {"epoch": "4/2/abc", "workers": 6, "since": 4.0},
        {"epoch": "3/2/abc", "workers": 5, "since": 3.0},
        {"epoch": "2/2/abc", "workers": 4, "since": 2.0},
    ]
    assert len(EpochHistory().rows()) == 0 and HISTORY_LIMIT == 20
    with pytest.raises(ValueError, match="at least 1 epoch, not 0"):
        EpochHistory(limit=0)


def test_the_histories_of_several_workers_merge_into_one_newest_first() -> None:
    older = [{"epoch": "1/3/c", "workers": 3, "since": 20.0}, {"epoch": "0/2/c", "workers": 2, "since": 10.0}]
    # a worker the rescale added knows only the new epoch, and started routing by it later
    joined = [{"epoch": "1/3/c", "workers": 3, "since": 21.5}]
    rows = merge_histories([joined, older])
    assert rows == [
        {"epoch": "1/3/c", "workers": 3, "since": 20.0},
        {"epoch": "0/2/c", "workers": 2, "since": 10.0},
    ]
    many = [{"epoch": f"{i}/2/c", "workers": 2, "since": float(i)} for i in range(30)]
    assert [r["epoch"] for r in merge_histories([many])] == [
        f"{i}/2/c" for i in range(29, 29 - HISTORY_LIMIT, -1)
    ]
    assert merge_histories([]) == []


def test_an_admin_epoch_history_answer_reads_as_the_rows_a_worker_keeps() -> None:
    history = EpochHistory()
    history.record("0/2/c", 2, since=10.0)
    history.record("1/1/c", 1, since=12.5)
    answer = admin_pb2.EpochHistory(
        epochs=[
            admin_pb2.EpochRecord(epoch=r["epoch"], workers=r["workers"], since_unix_seconds=r["since"])
            for r in history.rows()
        ]
    )
    assert history_rows(answer) == history.rows()
    view = ViewBuilder().view({}, {}, None, history=history_rows(answer))
    assert [(r["epoch"], r["workers"]) for r in view["history"]] == [("1/1/c", 1), ("0/2/c", 2)]
