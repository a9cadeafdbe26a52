"""KubernetesDirectory with the real kubernetes client against the test API server."""

from __future__ import annotations

from pathlib import Path

from tests.discovery.apiserver import FakeApiServer, endpoint_slice
from tests.helpers import eventually
from tuplemesh.discovery.kubernetes import KubernetesDirectory, api_client_from_environment

SERVICE = "mesh-tuplemesh-headless"


def directory(apiserver: FakeApiServer, tmp_path: Path, watch_timeout: int = 30) -> KubernetesDirectory:
    api = api_client_from_environment(str(apiserver.kubeconfig(tmp_path / "kubeconfig")))
    d = KubernetesDirectory(api, "streams", SERVICE, watch_timeout=watch_timeout,
                            min_backoff=0.05, max_backoff=0.2, log_interval=0)  # fmt: skip
    d.start()
    assert d.listed.wait(10)
    return d


def pods(*spec: tuple[int, str, bool | None]) -> list[tuple[str, str, bool | None]]:
    return [(f"mesh-tuplemesh-{i}", ip, ready) for i, ip, ready in spec]


def test_pod_added_and_turning_not_ready(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True), (1, "10.0.0.2", None))))
    apiserver.put(endpoint_slice("other", "another-service", pods((2, "10.9.9.9", True))))
    d = directory(apiserver, tmp_path)
    seen: list[dict[int, tuple[str, int]]] = []
    d.subscribe(seen.append)
    try:
        assert d.snapshot() == {0: ("10.0.0.1", 6700), 1: ("10.0.0.2", 6700)}  # ready nil counts as ready
        apiserver.put(endpoint_slice("s2", SERVICE, pods((2, "10.0.0.3", True))))
        eventually(lambda: 2 in d.snapshot())
        assert seen[-1] == {0: ("10.0.0.1", 6700), 1: ("10.0.0.2", 6700), 2: ("10.0.0.3", 6700)}
        apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True), (1, "10.0.0.2", False))))
        eventually(lambda: 1 not in d.snapshot())
        assert d.snapshot() == {0: ("10.0.0.1", 6700), 2: ("10.0.0.3", 6700)}
        apiserver.delete("s2")
        eventually(lambda: d.snapshot() == {0: ("10.0.0.1", 6700)})
        assert d.relists == 0 and d.api_errors == 0
    finally:
        d.stop()


def test_new_ip_of_a_restarted_pod(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True), (1, "10.0.0.2", True))))
    d = directory(apiserver, tmp_path)
    try:
        apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True), (1, "10.0.0.7", True))))
        eventually(lambda: d.snapshot().get(1) == ("10.0.0.7", 6700))
    finally:
        d.stop()


def test_410_gone_on_watch_relists(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True))))
    d = directory(apiserver, tmp_path, watch_timeout=1)
    try:
        apiserver.compact()  # history gone: the next watch from our version gets 410
        apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True), (1, "10.0.0.2", True))))
        apiserver.compact()
        apiserver.watchers_cut()
        assert eventually(lambda: d.stats().relists >= 1 and 1 in d.snapshot())
        assert d.stats().relists == 1 and d.stats().api_errors == 0  # one 410, one relist
    finally:
        d.stop()


def test_watch_timeout_resumes_without_relisting(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True))))
    d = directory(apiserver, tmp_path, watch_timeout=1)
    try:
        eventually(lambda: d.watch_restarts >= 2)
        apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.9", True))))
        eventually(lambda: d.snapshot() == {0: ("10.0.0.9", 6700)})
        assert d.relists == 0
        lists = [r for r in apiserver.requests if "watch=" not in r]
        assert len(lists) == 1  # resumed from the last resourceVersion, never listed again
    finally:
        d.stop()


def test_malformed_slices_are_counted_and_the_last_good_view_kept(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True))))
    d = directory(apiserver, tmp_path)
    try:
        bad = endpoint_slice(
            "s2", SERVICE, [("no-ordinal-here", "10.0.0.5", True), ("mesh-tuplemesh-1", "10.0.0.2", True)]
        )
        apiserver.put(bad)
        eventually(lambda: 1 in d.snapshot())
        assert d.problems == 1  # the endpoint without an ordinal
        broken = endpoint_slice("s3", SERVICE, [])
        broken["endpoints"] = "not a list"
        broken["ports"] = [{"name": "transfer", "port": "six"}]
        apiserver.put(broken)
        apiserver.put(endpoint_slice("s4", SERVICE, pods((7, "10.0.0.8", True))))
        # every change re-reads every slice: s3 adds s2's problem again and its own (2), s4 adds
        # those two again and none of its own: an ordinal beyond the workers is a pod a
        # scale-up adds, ready before the mesh grows to include it
        eventually(lambda: 7 in d.snapshot())
        assert d.problems == 1 + 2 + 2
        assert d.snapshot() == {0: ("10.0.0.1", 6700), 1: ("10.0.0.2", 6700), 7: ("10.0.0.8", 6700)}
    finally:
        d.stop()


def test_api_server_down_for_a_while_then_back(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True))))
    d = directory(apiserver, tmp_path, watch_timeout=1)
    try:
        apiserver.down()
        apiserver.put(endpoint_slice("s1", SERVICE, pods((0, "10.0.0.1", True), (2, "10.0.0.3", True))))
        assert eventually(lambda: d.stats().api_errors >= 2, 15)  # what the worker's snapshot reports
        assert d.snapshot() == {0: ("10.0.0.1", 6700)}  # the last good view, while the server is away
        apiserver.up()
        eventually(lambda: d.snapshot() == {0: ("10.0.0.1", 6700), 2: ("10.0.0.3", 6700)}, timeout=15)
    finally:
        d.stop()
