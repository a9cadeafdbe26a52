"""Feature panels on the web UI (tuplemesh.core.panel.MeshPanel), with a panel of the test's own:
the page names each panel's script and style after its own, serves them without the token, refuses
names it cannot carry, and a panel whose merge fails leaves the rest of the view whole."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import pytest

from tests.ui.test_view_and_server import call, stats
from tuplemesh.core.feature import Feature
from tuplemesh.ui.server import UiApp
from tuplemesh.ui.view import ViewBuilder, check_panel_names


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
