"""The web UI in a real browser (headless Chromium) against real worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from tests.fault.harness import stateful_wordcount_config
from tests.helpers import child_pythonpath, eventually
from tests.ui.topologies import HOT_WORDS, IMG_KEY, LONG_KEY, SCRIPT_KEY, slow_wordcount
from tests.worker.conftest import ROOT, Mesh, start_mesh
from tuplemesh.netutil import free_ports
from tuplemesh.ui.graph import topology_graph
from tuplemesh.v1 import admin_pb2

TOPOLOGY = "tests.ui.topologies:slow_wordcount"
#: The user guide's picture of the page (docs/ui.md): rewritten from this test's page only when
#: $TUPLEMESH_UPDATE_SCREENSHOT is set, so that a test run leaves the checkout as it found it.
SCREENSHOT = ROOT / "docs" / "images" / "ui-wordcount.png"


def stop_slow(mesh: Mesh) -> None:
    """Stop a mesh running the slow bolt without waiting out its drain: the bolt's backlog takes
    its workers half a minute each to work off (a batch of words at 50 ms each runs to its end),
    and these tests look at pages, not at the drain (the fault tests do). So SIGKILL at once: a
    SIGTERM first only waited out a timeout for a drain that could not end in it, per worker."""
    for proc in mesh.procs:
        proc.kill()
    for proc in mesh.procs:
        proc.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1100"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def mesh() -> Iterator[Mesh]:
    mesh = start_mesh(TOPOLOGY, 3)
    yield mesh
    stop_slow(mesh)


@pytest.fixture(scope="module")
def ui_url(mesh: Mesh) -> Iterator[str]:
    """``tuplemesh ui`` following the three workers."""
    (port,) = free_ports(1)
    targets = ",".join(mesh.address(i) for i in range(3))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuplemesh.cli", "ui", "--target", targets, "--port", str(port)],
        cwd=ROOT,
        env={"PYTHONPATH": child_pythonpath(), **_env_passthrough()},
    )
    url = f"http://127.0.0.1:{port}/ui/"
    eventually(lambda: _status(url) == 200, timeout=30, interval=0.1, message="tuplemesh ui serving")
    yield url
    proc.terminate()
    assert proc.wait(10) is not None


def _env_passthrough() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TUPLEMESH_PURE_PYTHON")}


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


# The page rebuilds its tables every second: each read is one script, so no element goes stale
# between finding it and reading it.


def _node_state(browser: webdriver.Chrome, component: str) -> str:
    return str(
        browser.execute_script(
            "const n = document.querySelector(`#graph .node[data-component='${arguments[0]}']`);"
            "return n ? n.dataset.state || '' : '';",
            component,
        )
    )


def _row_text(browser: webdriver.Chrome, selector: str) -> str:
    return str(
        browser.execute_script(
            "const r = document.querySelector(arguments[0]); return r ? r.textContent : '';", selector
        )
    )


def _health(browser: webdriver.Chrome, target: str) -> str:
    return str(
        browser.execute_script(
            "const r = document.querySelector(`#workers tr[data-target='${arguments[0]}']`);"
            "return r ? r.dataset.health : '';",
            target,
        )
    )


def _cell(browser: webdriver.Chrome, component: str, column: int) -> str:
    return str(
        browser.execute_script(
            "const c = document.querySelectorAll(`#components tr[data-component='${arguments[0]}'] td`);"
            "return c.length > arguments[1] ? c[arguments[1]].textContent : '';",
            component,
            column,
        )
    )


def test_graph_shows_every_component_and_stream_rates_rise_and_the_slow_bolt_is_backpressured(
    browser: webdriver.Chrome, ui_url: str, tmp_path: Path
) -> None:
    graph = topology_graph(slow_wordcount)
    browser.get(ui_url)
    eventually(
        lambda: len(browser.find_elements(By.CSS_SELECTOR, "#graph .node")) == len(graph["components"]),
        timeout=30,
        interval=0.2,
        message="every component drawn",
    )
    nodes = {
        n.get_attribute("data-component") for n in browser.find_elements(By.CSS_SELECTOR, "#graph .node")
    }
    assert nodes == {"sentences", "split", "count", "audit"}
    edges = {
        (e.get_attribute("data-source"), e.get_attribute("data-stream"), e.get_attribute("data-target"))
        for e in browser.find_elements(By.CSS_SELECTOR, "#graph .edge")
    }
    assert edges == {(s["source"], s["stream"], s["target"]) for s in graph["streams"]}
    assert "default (fields: word)" in browser.find_element(By.ID, "graph").text

    # executed (column 5) grows while the topology runs, across the three workers
    first = eventually(
        lambda: int(_cell(browser, "split", 5).replace(",", "") or 0), timeout=30, interval=0.2
    )
    eventually(
        lambda: int(_cell(browser, "split", 5).replace(",", "") or 0) > first,
        timeout=30,
        interval=0.2,
        message="split's executed count rises",
    )
    eventually(lambda: _cell(browser, "split", 2) not in ("", "0"), timeout=30, interval=0.2)
    # the 50 ms-per-word bolt: its inbox fills and its task holds senders back
    eventually(
        lambda: _node_state(browser, "audit") == "congested",
        timeout=60,
        interval=0.2,
        message="audit shown backpressured",
    )
    assert (
        "BACKPRESSURED" in browser.find_element(By.CSS_SELECTOR, '#graph .node[data-component="audit"]').text
    )
    assert _cell(browser, "audit", 1) == "backpressured"
    assert _node_state(browser, "sentences") != ""
    eventually(
        lambda: all(_health(browser, t) == "up" for t in _targets(browser)) and len(_targets(browser)) == 3,
        timeout=30,
        interval=0.2,
    )
    # hot keys are not counted in this mesh: no badge, no hot-keys section (tuplemesh ui is
    # refused Admin/HotKeys and shows the rest of the page)
    assert _hot_keys_shown(browser) == (True, 0)
    shot = SCREENSHOT if os.environ.get("TUPLEMESH_UPDATE_SCREENSHOT") else tmp_path / SCREENSHOT.name
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def _hot_keys_shown(browser: webdriver.Chrome) -> tuple[bool, int]:
    """(the hot-keys section hidden, graph badges shown)."""
    hidden, badges = browser.execute_script(
        "return [document.getElementById('hotkeys-section').hidden,"
        " Array.from(document.querySelectorAll('#graph .hotkey-badge'))"
        ".filter(b => b.getAttribute('display') !== 'none').length];"
    )
    return bool(hidden), int(badges)


def _targets(browser: webdriver.Chrome) -> list[str]:
    return list(
        browser.execute_script(
            "return Array.from(document.querySelectorAll('#workers tr[data-target]'), r => r.dataset.target);"
        )
    )


def test_a_killed_worker_shows_down_then_up_after_restart(
    browser: webdriver.Chrome, ui_url: str, mesh: Mesh
) -> None:
    browser.get(ui_url)
    target = mesh.address(2)
    eventually(lambda: _health(browser, target) == "up", timeout=30, interval=0.2, message="worker 2 up")
    mesh.kill(2)
    eventually(lambda: _health(browser, target) == "down", timeout=30, interval=0.2, message="worker 2 down")
    assert "down: UNAVAILABLE" in _row_text(browser, f'#workers tr[data-target="{target}"]')
    mesh.restart(2)
    eventually(
        lambda: _health(browser, target) == "up", timeout=60, interval=0.2, message="worker 2 up again"
    )


def test_each_worker_serves_the_whole_mesh_on_its_metrics_port(browser: webdriver.Chrome, mesh: Mesh) -> None:
    browser.get(f"http://127.0.0.1:{mesh.metrics_ports[0]}/ui/")
    eventually(
        lambda: len(browser.find_elements(By.CSS_SELECTOR, "#graph .node")) == 4, timeout=30, interval=0.2
    )
    every = [mesh.address(i) for i in range(3)]
    eventually(lambda: _targets(browser) == every, timeout=30, interval=0.2, message="the three workers")
    eventually(lambda: all(_health(browser, t) == "up" for t in every), timeout=30, interval=0.2)
    with urllib.request.urlopen(f"http://127.0.0.1:{mesh.metrics_ports[0]}/ui/view.json", timeout=5) as r:
        view = json.load(r)
    assert [w["worker"] for w in view["workers"]] == [0, 1, 2]
    assert (view["scope"], view["served_by"]) == ("mesh", 0)
    assert browser.find_element(By.ID, "scope").text.startswith("Served by worker 0, which asks every other")
    assert view["graph"] == json.loads(json.dumps(topology_graph(slow_wordcount)))
    assert all(w["rss_bytes"] > 0 for w in view["workers"])
    assert all("hot_keys" not in c for c in view["components"].values())  # not counted here
    assert _hot_keys_shown(browser) == (True, 0)


def _history(browser: webdriver.Chrome) -> list[list[str]]:
    return list(
        browser.execute_script(
            "return Array.from(document.querySelectorAll('#history tbody tr'),"
            " r => Array.from(r.cells, c => c.textContent));"
        )
    )


def test_a_workers_page_shows_its_peers_tasks_and_a_rescale_as_a_new_history_row(
    browser: webdriver.Chrome,
) -> None:
    mesh = start_mesh("tests.ui.topologies:wordcount", 2)
    try:
        browser.get(f"http://127.0.0.1:{mesh.metrics_ports[0]}/ui/")
        peer = mesh.address(1)
        eventually(lambda: _health(browser, peer) == "up", timeout=30, interval=0.2, message="worker 1 up")
        tasks = mesh.admin(1).GetStatus(admin_pb2.GetStatusRequest(), timeout=5).tasks
        assert tasks > 0
        # worker 1's row, read through worker 0: its index and "<congested> of <its tasks>"
        eventually(
            lambda: _row_text(browser, f'#workers tr[data-target="{peer}"]').startswith(
                f"1{peer}up (SERVING)"
            ),
            timeout=30,
            interval=0.2,
        )
        cells = browser.execute_script(
            "return Array.from(document.querySelectorAll(`#workers tr[data-target='${arguments[0]}'] td`),"
            " c => c.textContent);",
            peer,
        )
        assert cells[6].endswith(f" of {tasks}")
        first = mesh.admin(0).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=10).epoch
        eventually(lambda: [r[:2] for r in _history(browser)] == [[first, "2"]], timeout=30, interval=0.2)

        # a live rescale, to as many workers at the next epoch; the page follows it
        rescaled = mesh.admin(0).Rebalance(admin_pb2.RebalanceRequest(workers=2), timeout=30).epoch
        assert rescaled != first
        # the worker restarts its page with the epoch; the browser reconnects by itself
        eventually(
            lambda: [r[:2] for r in _history(browser)] == [[rescaled, "2"], [first, "2"]],
            timeout=60,
            interval=0.2,
            message="the rescale's epoch listed first",
        )
        assert [r[3] for r in _history(browser)] == ["current", ""]
        eventually(lambda: _health(browser, peer) == "up", timeout=60, interval=0.2, message="worker 1 back")
    finally:
        browser.get("about:blank")
        mesh.stop()


@pytest.fixture(scope="module")
def token_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    config = tmp_path_factory.mktemp("conf") / "tuplemesh.yaml"
    config.write_text("admin.token: s3cret-token\nui.events.clients: 1\n")
    mesh = start_mesh(TOPOLOGY, 1, config, env={"TUPLEMESH_ADMIN_TOKEN": "s3cret-token"})
    yield mesh
    stop_slow(mesh)


def _main_text(browser: webdriver.Chrome) -> str:
    """The page's main text; empty while the browser is between pages (a submitted form)."""
    try:
        return str(browser.find_element(By.TAG_NAME, "main").text)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def test_a_token_guards_the_page_and_its_events(browser: webdriver.Chrome, token_mesh: Mesh) -> None:
    base = f"http://127.0.0.1:{token_mesh.metrics_ports[0]}/ui/"
    assert _status(base + "events") == 401
    assert _status(base + "view.json", {"Authorization": "Bearer wrong"}) == 401
    assert _status(base + "view.json", {"Authorization": "Bearer s3cret-token"}) == 200
    assert _status(token_mesh.metrics_url()) == 200  # /metrics is unchanged
    browser.delete_all_cookies()
    browser.get(base)
    assert "needs its admin token" in browser.find_element(By.TAG_NAME, "main").text
    browser.find_element(By.ID, "token").send_keys("not-the-token")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    eventually(lambda: "access refused" in _main_text(browser), timeout=10)
    assert browser.find_elements(By.ID, "graph") == []
    browser.find_element(By.ID, "token").send_keys("s3cret-token")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    eventually(
        lambda: len(browser.find_elements(By.CSS_SELECTOR, "#graph .node")) == 4, timeout=30, interval=0.2
    )
    eventually(
        lambda: browser.find_element(By.ID, "connection").get_attribute("data-state") == "live",
        timeout=30,
        interval=0.2,
    )
    # the browser holds the one event stream ui.events.clients allows: a second is turned away
    assert _status(base + "events", {"Authorization": "Bearer s3cret-token"}) == 503
    browser.get("about:blank")


def test_a_ui_command_with_a_port_in_use_fails_with_one_line() -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "tuplemesh.cli", "ui", "--target", "127.0.0.1:1", "--port", str(port)],
            cwd=ROOT,
            env={"PYTHONPATH": child_pythonpath(), **_env_passthrough()},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"tuplemesh: error: --port {port}: cannot serve")


def test_checkpoints_of_a_stateful_topology_show_on_the_coordinators_page(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    config = stateful_wordcount_config(tmp_path / "tuplemesh.yaml", repeat=2500, rate=200.0)
    mesh = start_mesh("examples.stateful_wordcount:topology", 2, config)
    try:
        browser.get(f"http://127.0.0.1:{mesh.metrics_ports[0]}/ui/")  # worker 0 coordinates

        def committed() -> int:
            text = str(
                browser.execute_script(
                    "const d = document.querySelector('#checkpoints .cp-committed');"
                    "return d ? d.textContent : '';"
                )
            )
            return int(text.replace(",", "") or 0)

        eventually(lambda: committed() >= 2, timeout=60, interval=0.2, message="two checkpoints committed")
        last = str(
            browser.execute_script(
                "return document.querySelector('#checkpoints .cp-last-committed').textContent"
            )
        )
        assert last.startswith("#")
        epoch = mesh.admin(0).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=10).epoch
        assert f"Epoch {epoch}, 2 workers" == browser.find_element(By.ID, "epochs").text
    finally:
        browser.get("about:blank")
        mesh.stop()


def test_ui_enabled_false_leaves_metrics_only() -> None:
    mesh = start_mesh(TOPOLOGY, 1, env={"TUPLEMESH_UI_ENABLED": "false"})
    try:
        base = f"http://127.0.0.1:{mesh.metrics_ports[0]}"
        assert _status(base + "/ui/") == _status(base + "/ui/events") == 404
        assert _status(mesh.metrics_url()) == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "/ui/", timeout=5)
        assert refused.value.read() == b"the web UI is off on this worker (ui.enabled: false)\n"
    finally:
        stop_slow(mesh)


HOT_TOTAL = sum(HOT_WORDS.values())
HOT_KEYS_ON = {
    "TUPLEMESH_TOPOLOGY_HOTKEYS_ENABLED": "true",
    "TUPLEMESH_ADMIN_HOTKEYS_ENABLED": "true",
    "TUPLEMESH_TOPOLOGY_HOTKEYS_SAMPLE_EVERY": "1",  # every tuple: exact counts
}


def _hot_rows(browser: webdriver.Chrome) -> list[list[str]]:
    """The cells of the hot-keys table of ``count``'s stream from ``words``."""
    return list(
        browser.execute_script(
            "const t = document.querySelector("
            '\'#hotkeys table[data-component="count"][data-source="words"]\');'
            "return t ? Array.from(t.tBodies[0].rows, r => Array.from(r.cells, c => c.textContent)) : [];"
        )
    )


def _assert_hot_words_shown(browser: webdriver.Chrome, url: str) -> None:
    browser.get(url)
    ranked = sorted(HOT_WORDS.items(), key=lambda kv: -kv[1])
    long_shown = LONG_KEY[:47] + "…"  # the page shortens a key to 48 characters
    expected = [
        [
            str(rank),
            long_shown if word == LONG_KEY else word,
            f"{count:,}",
            f"{round(100 * count / HOT_TOTAL)}%",
        ]
        for rank, (word, count) in enumerate(ranked, 1)
    ]
    eventually(
        lambda: [row[:4] for row in _hot_rows(browser)] == expected,
        timeout=30,
        interval=0.2,
        message=f"the hot words ranked with their exact counts at {url}",
    )
    # one script: the page rebuilds the table every second, an element found earlier goes stale
    page = browser.execute_script(
        "const t = document.querySelector('#hotkeys table[data-component=\"count\"]');"
        "const keys = Array.from(t.querySelectorAll('td.key'));"
        "const b = document.querySelector('#graph .node[data-component=\"count\"] .hotkey-badge');"
        "return {caption: t.caption.textContent,"
        " heading: document.querySelector('#hotkeys h3').textContent,"
        " keys: keys.map(c => c.textContent), titles: keys.map(c => c.title),"
        " headers: Array.from(t.tHead.rows[0].cells, c => c.tagName + ' ' + c.scope + ' ' + c.textContent),"
        " ranks: Array.from(t.tBodies[0].rows, r => r.cells[0].tagName + ' ' + r.cells[0].scope),"
        " markup: document.querySelectorAll('#hotkeys script, #hotkeys img').length,"
        " pwned: window.__pwned !== undefined,"
        " badge: [b.getAttribute('display'), b.querySelector('text').textContent]};"
    )
    assert page["caption"].startswith(f"Stream default from words: {HOT_TOTAL} tuples on 2 tasks, skew ")
    assert page["caption"].endswith("; counts exact")
    assert page["heading"].startswith("count: skew ")
    # the keys that look like markup are text: no element made of them, no handler run
    assert page["keys"][3:5] == [SCRIPT_KEY, IMG_KEY]
    assert (page["markup"], page["pwned"]) == (0, False)
    assert page["titles"][5] == LONG_KEY  # the whole key in the tooltip
    assert page["headers"] == [
        f"TH col {name}" for name in ("rank", "key", "tuples", "share of tuples", "share of execute time")
    ]
    assert page["ranks"] == ["TH row"] * len(HOT_WORDS)
    assert page["badge"] == ["inline", f"top key: hot ({round(100 * 300 / HOT_TOTAL)}%)"]
    assert _hot_keys_shown(browser) == (False, 1)  # count's badge only: words has no keyed input


def test_the_hot_keys_of_a_finished_run_show_the_hot_word_first_with_its_exact_count(
    browser: webdriver.Chrome,
) -> None:
    """A finite word count (not the shared endless, backpressured mesh: its counts never settle)
    on two workers, each with one of count's tasks: worker 0's page, which asks worker 1 over
    Admin, and tuplemesh ui, which asks both."""
    mesh = start_mesh("tests.ui.topologies:hot_words", 2, env=HOT_KEYS_ON)
    ui: subprocess.Popen[bytes] | None = None
    try:
        page = f"http://127.0.0.1:{mesh.metrics_ports[0]}/ui/"

        def counted() -> int:
            with urllib.request.urlopen(page + "view.json", timeout=5) as r:
                hot = json.load(r)["components"]["count"].get("hot_keys")
            return int(hot["streams"][0]["tuples"]) if hot else 0

        # the run's total: every word executed, on one worker or the other
        eventually(lambda: counted() == HOT_TOTAL, timeout=60, interval=0.2, message="every word counted")
        _assert_hot_words_shown(browser, page)

        (port,) = free_ports(1)
        targets = ",".join(mesh.address(i) for i in range(2))
        ui = subprocess.Popen(
            [sys.executable, "-m", "tuplemesh.cli", "ui", "--target", targets, "--port", str(port)],
            cwd=ROOT,
            env={"PYTHONPATH": child_pythonpath(), **_env_passthrough()},
        )
        remote = f"http://127.0.0.1:{port}/ui/"
        eventually(lambda: _status(remote) == 200, timeout=30, interval=0.1, message="tuplemesh ui serving")
        _assert_hot_words_shown(browser, remote)
    finally:
        browser.get("about:blank")
        if ui is not None:
            ui.terminate()
            ui.wait(10)
        assert mesh.stop() == [0, 0]
