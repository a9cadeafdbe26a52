"""StatefulSetReplicas with the real kubernetes client against the test API server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.discovery.apiserver import FakeApiServer, statefulset
from tests.helpers import eventually
from tuplemesh.discovery.kubernetes import api_client_from_environment
from tuplemesh.discovery.statefulset import StatefulSetReplicas, replicas_of, statefulset_of_pod

NAME = "mesh-tuplemesh"


def source(apiserver: FakeApiServer, tmp_path: Path, watch_timeout: int = 30) -> StatefulSetReplicas:
    api = api_client_from_environment(str(apiserver.kubeconfig(tmp_path / "kubeconfig")))
    s = StatefulSetReplicas(api, "streams", NAME, watch_timeout=watch_timeout,
                            min_backoff=0.05, max_backoff=0.2, log_interval=0)  # fmt: skip
    s.start()
    assert s.watch.listed.wait(10)
    return s


def test_scales_are_seen_and_other_statefulsets_ignored(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(statefulset(NAME, 3))
    apiserver.put(statefulset("another", 7))
    s = source(apiserver, tmp_path)
    seen: list[int] = []
    s.subscribe(seen.append)
    try:
        assert s.replicas() == 3
        apiserver.put(statefulset(NAME, 5))
        eventually(lambda: s.replicas() == 5)
        apiserver.put(statefulset("another", 1))  # not ours: no notification
        apiserver.put(statefulset(NAME, 5))  # the same count (another field changed): none either
        apiserver.put(statefulset(NAME, 2))
        eventually(lambda: s.replicas() == 2)
        assert seen == [5, 2]
        watches = [r for r in apiserver.requests if "watch=" in r]
        assert watches and all("fieldSelector=metadata.name%3Dmesh-tuplemesh" in r for r in watches)
        apiserver.delete(NAME, kind="StatefulSet")
        eventually(lambda: s.replicas() is None)
        assert seen == [5, 2]  # a deleted StatefulSet asks for nothing
        assert s.watch.relists == 0 and s.watch.api_errors == 0
    finally:
        s.stop()


def test_not_found_until_created(apiserver: FakeApiServer, tmp_path: Path):
    s = source(apiserver, tmp_path)
    seen: list[int] = []
    s.subscribe(seen.append)
    try:
        assert s.replicas() is None
        apiserver.put(statefulset(NAME, 4))
        eventually(lambda: seen == [4])
    finally:
        s.stop()


def test_410_gone_on_watch_relists(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(statefulset(NAME, 3))
    s = source(apiserver, tmp_path, watch_timeout=1)
    try:
        apiserver.compact()  # history gone: the next watch from our version gets 410
        apiserver.put(statefulset(NAME, 6))
        apiserver.compact()
        apiserver.watchers_cut()
        eventually(lambda: s.watch.relists >= 1 and s.replicas() == 6)
        assert s.watch.relists == 1 and s.watch.api_errors == 0  # one 410, one relist
    finally:
        s.stop()


def test_api_server_down_for_a_while_then_back(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(statefulset(NAME, 3))
    s = source(apiserver, tmp_path, watch_timeout=1)
    try:
        apiserver.down()
        apiserver.put(statefulset(NAME, 1))
        eventually(lambda: s.watch.api_errors >= 2, 15)
        assert s.replicas() == 3  # the last good view while the server is away
        assert "Connection refused" in s.watch.last_error or "MaxRetryError" in s.watch.last_error
        apiserver.up()
        eventually(lambda: s.replicas() == 1, timeout=15)
    finally:
        s.stop()


def test_a_malformed_replica_count_keeps_the_last_good_one(apiserver: FakeApiServer, tmp_path: Path):
    apiserver.put(statefulset(NAME, 3))
    s = source(apiserver, tmp_path)
    try:
        broken = statefulset(NAME, 0)
        broken["spec"]["replicas"] = "five"
        apiserver.put(broken)
        apiserver.put(statefulset(NAME, 4))
        eventually(lambda: s.replicas() == 4)
        assert s.watch.api_errors == 0  # a bad object never broke the watch
    finally:
        s.stop()


def test_replicas_of_and_the_statefulset_of_a_pod():
    assert replicas_of({"spec": {"replicas": 0}}) == 0
    assert replicas_of({"spec": {}}) == 1  # the API's default
    assert replicas_of({"spec": {"replicas": True}}) is None
    assert replicas_of({"spec": {"replicas": -1}}) is None
    assert replicas_of({}) is None
    assert statefulset_of_pod("mesh-tuplemesh-12") == "mesh-tuplemesh"
    assert statefulset_of_pod("mesh-tuplemesh-0.mesh-tuplemesh-headless.streams.svc") == "mesh-tuplemesh"
    assert statefulset_of_pod("laptop") == "laptop"


def test_the_test_api_server_gets_one_statefulset_as_the_real_client_reads_it(
    apiserver: FakeApiServer, tmp_path: Path
):
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    apiserver.put(statefulset(NAME, 3))
    apps = client.AppsV1Api(api_client_from_environment(str(apiserver.kubeconfig(tmp_path / "kubeconfig"))))
    assert apps.read_namespaced_stateful_set(NAME, "streams").spec.replicas == 3
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_stateful_set("missing", "streams")
    assert err.value.status == 404
