"""The web UI's cost on the worker: const spout -> null bolt on 2 worker processes over grpc,
flat out, in alternating windows (ABAB...) of one run without and with a live UI client on worker
0's page, ``/ui/`` on its metrics port.

The client is headless Chromium (driven by Selenium, as the UI's browser tests drive it) holding
the page open, so the worker serves what a person's browser costs it: the page, its files and its
event stream of one view a second, each view built from this worker's reading and every peer's
Admin status. Without Chromium and chromedriver (or with ``BENCH_UI_CLIENT=http``) the client is
an HTTP client making the page's requests: the page, its script and style, then ``/ui/events``
read as it arrives. Between windows the client leaves the page (the worker's stream ends).

Per window: the null bolts' executed tuples per second, and the CPU seconds both worker processes
used per tuple (a worker's page asks its peers for their status, so the peer's cost counts too).
A second phase paces the spouts at 1,000 tuples/s and measures the workers' CPU time per second
with and without the client: what the UI adds, in CPU time, whatever else runs on the machine.
The client's own CPU is not counted; on a small machine it competes with the workers for cores,
which the throughput ratio shows and the CPU figures do not.
"""

from __future__ import annotations

import http.client
import os
import shutil
import statistics
import threading
import time
from typing import Any, Protocol

from bench.e2e import TARGET, _executed
from bench.procstat import cpu_seconds
from bench.records import Record
from tuplemesh.launcher import ProcessCluster

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Seconds after the client arrives or leaves before a window starts: the page loads and its
#: stream delivers a first view; a stream left ends within the UI's one-second interval.
SETTLE_SECONDS = 1.5
#: Seconds the workers run before the first window (the first seconds of a worker run slower).
WARM_UP_SECONDS = 3.0


class UiClient(Protocol):
    name: str

    def open(self, url: str) -> None: ...

    def leave(self) -> None: ...

    def quit(self) -> None: ...


class BrowserClient:
    """Headless Chromium on the page, as the UI's browser tests run it."""

    name = "headless Chromium (Selenium)"

    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1100"):
            options.add_argument(flag)
        self._driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))

    def open(self, url: str) -> None:
        self._driver.get(url)
        deadline = time.monotonic() + 30
        while (
            self._driver.execute_script(
                "const c = document.getElementById('connection'); return c ? c.dataset.state : '';"
            )
            != "live"
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the page at {url} did not go live within 30 s")
            time.sleep(0.1)

    def leave(self) -> None:
        self._driver.get("about:blank")

    def quit(self) -> None:
        self._driver.quit()


class HttpClient:
    """The page's requests without a browser: the page, its script and style, then its event
    stream, read as it arrives (on a thread) until ``leave``."""

    name = "HTTP client making the page's requests (no browser)"

    def __init__(self) -> None:
        self._conn: http.client.HTTPConnection | None = None
        self._thread: threading.Thread | None = None
        self.events = 0

    def open(self, url: str) -> None:
        rest = url.removeprefix("http://")
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.rpartition(":")
        for name in ("", "app.js", "app.css"):
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            conn.request("GET", f"/{path}{name}")
            conn.getresponse().read()
            conn.close()
        self._conn = http.client.HTTPConnection(host, int(port), timeout=10)
        self._conn.request("GET", f"/{path}events", headers={"Accept": "text/event-stream"})
        reply = self._conn.getresponse()
        if reply.status != 200:
            raise RuntimeError(f"{url}events answered {reply.status}")
        self._thread = threading.Thread(target=self._read, args=(reply,), daemon=True)
        self._thread.start()

    def _read(self, reply: http.client.HTTPResponse) -> None:
        try:
            for line in reply:
                if line.startswith(b"data: "):
                    self.events += 1
        except (OSError, ValueError, AttributeError):  # the socket closed by leave()
            pass

    def leave(self) -> None:
        if self._conn is not None:
            sock = self._conn.sock
            if sock is not None:
                sock.close()
            self._conn.close()
            self._conn = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def quit(self) -> None:
        self.leave()


def make_client() -> UiClient:
    """Chromium when it and its driver are installed and ``BENCH_UI_CLIENT`` is not ``http``."""
    choice = os.environ.get("BENCH_UI_CLIENT", "")
    if choice not in ("", "browser", "http"):
        raise SystemExit(f"BENCH_UI_CLIENT must be browser or http, not {choice!r}")
    browser_here = os.path.exists(CHROMIUM) and (
        os.path.exists(CHROMEDRIVER) or shutil.which("chromedriver") is not None
    )
    if choice == "browser" or (choice == "" and browser_here):
        try:
            return BrowserClient()
        except ImportError:
            if choice == "browser":
                raise
    return HttpClient()


def measure(
    client: UiClient, seconds: float, rounds: int, rate: float = 0.0, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """``rounds`` windows with the client and ``rounds + 1`` without, alternating, each
    ``seconds`` long; the spouts flat out (``rate`` 0) or paced at ``rate`` tuples/s each."""
    from bench.topologies import build

    os.environ["BENCH_RATE"] = str(rate)
    cluster = ProcessCluster(TARGET, build(), 2, transport="grpc", env=env)
    # per window: tuples/s, worker CPU seconds per tuple, worker CPU seconds per second
    windows: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    try:
        cluster.start()
        cluster.wait_serving(60)
        url = f"http://127.0.0.1:{cluster.metrics_ports[0]}/ui/"
        time.sleep(WARM_UP_SECONDS)
        # without, with, without, ..., without: every with-window has a without-window on each
        # side, so a drift of the machine's load over the run cancels out of its ratio
        for attached in [False, True] * rounds + [False]:
            if attached:
                client.open(url)
            else:
                client.leave()
            time.sleep(SETTLE_SECONDS)
            cpu0 = sum(cpu_seconds(p.pid) for p in cluster.procs)
            count0, start = _executed(cluster), time.monotonic()
            time.sleep(seconds)
            count1, end = _executed(cluster), time.monotonic()
            cpu1 = sum(cpu_seconds(p.pid) for p in cluster.procs)
            tuples = max(count1 - count0, 1)
            windows[attached].append(
                (tuples / (end - start), (cpu1 - cpu0) / tuples, (cpu1 - cpu0) / (end - start))
            )
        client.leave()
        cluster.check_alive()
    finally:
        cluster.stop()

    def median(attached: bool, index: int) -> float:
        return statistics.median(w[index] for w in windows[attached])

    def neighbours(index: int) -> list[tuple[float, float]]:
        """Each with-window's figure beside the mean of the without-windows either side of it."""
        without = windows[False]
        return [
            (w[index], (without[i][index] + without[i + 1][index]) / 2) for i, w in enumerate(windows[True])
        ]

    return {
        "rate_with": median(True, 0),
        "rate_without": median(False, 0),
        "cpu_per_tuple_with": median(True, 1),
        "cpu_per_tuple_without": median(False, 1),
        "cpu_per_second_with": median(True, 2),
        "cpu_per_second_without": median(False, 2),
        "rate_ratios": [w / wo for w, wo in neighbours(0)],
        "cpu_ratios": [w / wo for w, wo in neighbours(1)],
        "cpu_extra": [w - wo for w, wo in neighbours(2)],
        "windows": windows,
    }


#: Tuples/s each of the two spout tasks emits in the paced phase: a light load, so the workers'
#: CPU is mostly what the UI adds, and little is taken from them by other processes.
PACED_RATE = 500.0
#: A paced spout that has nothing due sleeps 50 ms instead of 1 ms: the workers' own CPU stays low,
#: so what the UI adds stands out of the noise.
PACED_ENV = {"TUPLEMESH_TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS": "50"}


def run(quick: bool = False) -> list[Record]:
    seconds = 2.0 if quick else 3.0
    rounds = 2 if quick else 3
    client = make_client()
    try:
        full = measure(client, seconds, rounds)
        paced = measure(client, seconds, rounds, rate=PACED_RATE, env=PACED_ENV)
    finally:
        client.quit()
    rate_ratio = statistics.median(full["rate_ratios"])
    cpu_ratio = statistics.median(full["cpu_ratios"])
    extra = statistics.median(paced["cpu_extra"])
    windows = (
        f"{rounds + 1} without and {rounds} with, alternating, {seconds:g} s each (figures above: medians)"
    )
    return [
        Record(
            "ui",
            "const spout -> null bolt, 2 worker processes over grpc, a live client on worker 0's web UI: max",
            "tuples",
            full["rate_with"],
            {"the same without a UI client (alternate windows of this run)": full["rate_without"]},
            "UI cost <= 2%: throughput ratio >= 0.98, worker CPU per tuple ratio <= 1.02",
            {
                "client": client.name,
                "windows": windows,
                # each with-window against the mean of the without-windows either side of it
                "throughput ratio with/without (median of windows)": round(rate_ratio, 3),
                "worker CPU per tuple ratio with/without (median of windows)": round(cpu_ratio, 3),
                "throughput ratio per with-window": [round(r, 3) for r in full["rate_ratios"]],
                "CPU per tuple ratio per with-window": [round(r, 3) for r in full["cpu_ratios"]],
                "worker CPU us per tuple with / without (medians)": (
                    f"{full['cpu_per_tuple_with'] * 1e6:.3f} / {full['cpu_per_tuple_without'] * 1e6:.3f}"
                ),
                "throughput per window with": [round(r) for r, _, _ in full["windows"][True]],
                "throughput per window without": [round(r) for r, _, _ in full["windows"][False]],
            },
        ),
        Record(
            "ui",
            f"the same paced at {2 * PACED_RATE:g} tuples/s: CPU ms per second of both workers with "
            "the UI client",
            "CPU ms",
            paced["cpu_per_second_with"] * 1000,
            {"the same without a UI client": paced["cpu_per_second_without"] * 1000},
            "",
            {
                "windows": windows,
                # what the UI adds, in CPU time: independent of how busy the machine is
                "CPU ms per second the UI adds (median of windows)": round(extra * 1000, 1),
                "CPU ms per second added, per with-window": [round(e * 1000, 1) for e in paced["cpu_extra"]],
                "as a share of the CPU both workers use flat out (run above, without the client)": (
                    f"{100 * extra / full['cpu_per_second_without']:.2f}%"
                ),
            },
        ),
    ]
