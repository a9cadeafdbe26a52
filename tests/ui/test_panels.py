"""Feature panels on the web UI (tuplemesh.core.panel.MeshPanel), with a panel of the test's own:
the page names each panel's script and style after its own, serves them without the token, refuses
names it cannot carry, and a panel whose merge fails leaves the rest of the view whole."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent import futures
from typing import Any

import grpc
import pytest

from tests.helpers import eventually
from tests.ui.test_view_and_server import call, stats
from tuplemesh.core.feature import Feature
from tuplemesh.ui.remote import MeshFollower
from tuplemesh.ui.server import UiApp
from tuplemesh.ui.view import ViewBuilder, check_panel_names
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc


class Panel:
    """Shows each answer's count under component "a"; ``fails``: its merge raises."""

    def __init__(self, name: str = "counts", fails: bool = False) -> None:
        self.name, self.fails = name, fails

    def shown(self, conf: Mapping[str, Any]) -> bool:
        return True

    def local(self, worker: int, feature: Feature | None) -> Any | None:
        return None

    def ask(self, channel: grpc.Channel, timeout: float) -> grpc.Future:
        raise AssertionError("not asked here")

    def merge(self, answers: Sequence[Any]) -> Mapping[str, Mapping[str, Any]]:
        if self.fails:
            raise RuntimeError("a bug in the panel")
        return {"a": {"total": sum(answers)}} if answers else {}

    def script(self) -> bytes:
        return b"window.tuplemeshUi.registerPanel({name: 'counts'});"

    def style(self) -> bytes:
        return b".counts { color: red; }"


def test_the_page_loads_each_panels_assets_after_its_own_and_serves_them_without_the_token() -> None:
    app = UiApp(lambda: {}, token="t0k", panels=[Panel(), Panel("other")])
    status, _, body = call(app, "/ui/", authorization="Bearer t0k")
    page = b"".join(body).decode()
    assert status == "200 OK" and "<!-- panel assets -->" not in page
    scripts = re.findall(r'<script src="([^"]+)" defer></script>', page)
    assert scripts == ["/ui/app.js", "/ui/panels/counts.js", "/ui/panels/other.js"]  # in this order
    assert re.findall(r'<link rel="stylesheet" href="(/ui/panels/[^"]+)">', page) == [
        "/ui/panels/counts.css",
        "/ui/panels/other.css",
    ]
    status, headers, body = call(app, "/ui/panels/counts.js")  # no token: no data in it
    assert (status, b"".join(body)) == ("200 OK", Panel().script())
    assert headers["Content-Type"] == "text/javascript; charset=utf-8"
    status, headers, body = call(app, "/ui/panels/counts.css")
    assert (status, headers["Content-Type"], b"".join(body)) == (
        "200 OK",
        "text/css; charset=utf-8",
        Panel().style(),
    )
    assert call(app, "/ui/panels/nothing.js")[0] == "404 Not Found"
    assert call(app, "/ui/panels/../app.js")[0] == "404 Not Found"


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["hot-keys"], "letters, digits and _ only, not 'hot-keys'"),
        (["../x"], "letters, digits and _ only, not '../x'"),
        (['a"b'], "letters, digits and _ only"),
        (["errors"], "panel name 'errors' is taken"),  # a component's own field in the view
        (["_latency"], "letters, digits and _ only|is taken"),
        (["counts", "counts"], "panel name 'counts' is taken"),
    ],
)
def test_a_panel_name_the_ui_cannot_carry_is_refused(names: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_panel_names(names)
    with pytest.raises(ValueError, match=message):
        UiApp(lambda: {}, panels=[Panel(name) for name in names])


def test_a_panels_entries_come_from_the_workers_up_and_a_failing_merge_leaves_the_rest() -> None:
    builder = ViewBuilder()
    view = builder.view(
        {"w0": stats(0, 1, 0.1, []), "w1": stats(1, 1, 0.1, []), "w2": None},
        {"w2": "UNAVAILABLE: down"},
        None,
        panels=[(Panel(), {"w0": 2, "w1": 3, "w2": 100}), (Panel("broken", fails=True), {"w0": 1})],
    )
    assert view["components"]["a"]["counts"] == {"total": 5}  # w2 is down: its answer is not shown
    assert "broken" not in view["components"]["a"]
    assert [w["up"] for w in view["workers"]] == [True, True, False]  # the rest of the view whole


class FakeWorker(admin_pb2_grpc.AdminServicer):
    """A worker's Admin as ``tuplemesh ui`` reads it: ``messages`` stats messages, then the
    stream stays open (until cancelled); its epoch history; no graph."""

    def __init__(self, messages: int) -> None:
        self.messages = messages
        self.sent = threading.Semaphore(0)

    def WatchStats(self, request: Any, context: grpc.ServicerContext) -> Iterator[admin_pb2.WorkerStats]:
        for _ in range(self.messages):
            yield stats(0, 1, 0.1, [])
            self.sent.release()
        while context.is_active():
            time.sleep(0.05)

    def GetAssignment(self, request: Any, context: grpc.ServicerContext) -> admin_pb2.AssignmentInfo:
        return admin_pb2.AssignmentInfo()

    def GetEpochHistory(self, request: Any, context: grpc.ServicerContext) -> admin_pb2.EpochHistory:
        return admin_pb2.EpochHistory(epochs=[admin_pb2.EpochRecord(epoch="0/2/abc", workers=2)])


class CalledPanel(Panel):
    """Asks the fake worker's ``/test.Panel/<name>``, which answers ``code`` (OK: the number 4)."""

    def __init__(self, name: str, code: grpc.StatusCode) -> None:
        super().__init__(name)
        self.code = code

    def ask(self, channel: grpc.Channel, timeout: float) -> grpc.Future:
        call = channel.unary_unary(
            f"/test.Panel/{self.name}", request_serializer=bytes, response_deserializer=bytes
        )
        return _Decoded(call.future(b"", timeout=timeout))


class _Decoded:
    def __init__(self, future: grpc.Future) -> None:
        self.future = future

    def result(self) -> int:
        return int(self.future.result())


def test_tuplemesh_ui_stops_asking_a_worker_that_refuses_a_panel_and_keeps_asking_one_that_fails() -> None:
    asked: dict[str, int] = {"counts": 0, "refused": 0, "flaky": 0}
    codes = {"counts": grpc.StatusCode.OK, "refused": grpc.StatusCode.PERMISSION_DENIED,
             "flaky": grpc.StatusCode.UNAVAILABLE}  # fmt: skip

    def answer(name: str) -> Any:
        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            asked[name] += 1
            if codes[name] != grpc.StatusCode.OK:
                context.abort(codes[name], f"{name} says no")
            return b"4"

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=bytes, response_serializer=bytes
        )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    worker = FakeWorker(messages=5)
    admin_pb2_grpc.add_AdminServicer_to_server(worker, server)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("test.Panel", {name: answer(name) for name in asked})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    target = f"127.0.0.1:{port}"
    panels = [CalledPanel(name, codes[name]) for name in asked]
    follower = MeshFollower([target], panels=panels)
    try:
        for _ in range(5):
            assert worker.sent.acquire(timeout=30)
        eventually(lambda: asked["flaky"] == 5, timeout=30, message="asked with each stats message")
        view = follower.view()
    finally:
        follower.stop()
        server.stop(None)
    # answered: shown; refused: asked once for the stream's life; failing: asked every time
    assert asked == {"counts": 5, "refused": 1, "flaky": 5}
    assert view["components"]["a"] == {**view["components"]["a"], "counts": {"total": 4}}
    assert all("refused" not in c and "flaky" not in c for c in view["components"].values())
