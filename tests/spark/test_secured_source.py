"""The data source against a secured mesh: mTLS on the worker port and a bearer token on the
Gateway (a local Spark session, one per module, and real worker processes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pyspark.sql import SparkSession

from tests.helpers import eventually
from tests.pki import make_ca, make_leaf
from tests.security.test_mtls_and_tokens import tls_as, tls_env, wait_tls_serving
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.client import open_channel
from tuplemesh.spark import local_session
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc

TOKEN = "s3cret"
ROWS = [f"secured-{i:04d}" for i in range(300)]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_session("tuplemesh-secured-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    mesh_ca = make_ca(d, "mesh-ca")
    make_leaf(d, "worker", mesh_ca, worker=True)
    make_leaf(d, "client", mesh_ca)
    return d


@pytest.fixture(scope="module")
def mesh(pki: Path) -> Iterator[Mesh]:
    mesh = start_mesh(
        "tests.spark.topologies:echo", 2, wait=False, env=tls_env(pki, TUPLEMESH_ADMIN_TOKEN=TOKEN)
    )
    for i in range(2):
        wait_tls_serving(mesh.address(i), pki)
    yield mesh
    assert mesh.stop() == [0, 0]


def targets(mesh: Mesh) -> str:
    return ",".join(mesh.address(i) for i in range(len(mesh.ports)))


def secured(pki: Path, token: str = TOKEN) -> dict[str, str]:
    """The data source options that reach the mesh as the client certificate, with ``token``."""
    return {
        "token": token,
        "tlsCaFile": str(pki / "mesh-ca.pem"),
        "tlsCertFile": str(pki / "client.crt"),
        "tlsKeyFile": str(pki / "client.key"),
    }


def exported(mesh: Mesh, pki: Path, export: str) -> int:
    """Records the export holds across the workers, asked over mTLS with the token."""
    total = 0
    for i in range(len(mesh.ports)):
        stub = gateway_pb2_grpc.GatewayStub(open_channel(mesh.address(i), tls_as(pki, "client"), TOKEN))
        try:
            answer = stub.Offsets(gateway_pb2.OffsetsRequest(export=export), timeout=5)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND  # no partition on that worker
            continue
        total += sum(p.end - p.start for p in answer.partitions)
    return total


def test_batch_write_and_read_through_a_secured_mesh(spark: SparkSession, mesh: Mesh, pki: Path):
    df = spark.createDataFrame([(r,) for r in ROWS], ["line"]).repartition(3)
    df.write.format("tuplemesh").options(**secured(pki)).option("targets", targets(mesh)) \
        .option("component", "lines").option("batchSize", "40").mode("append").save()  # fmt: skip
    eventually(lambda: exported(mesh, pki, "echo") == len(ROWS), timeout=30, message="all rows exported")
    out = (
        spark.read.format("tuplemesh").options(**secured(pki)).option("targets", targets(mesh))
        .option("export", "echo").load()
    )  # fmt: skip
    assert sorted(r["line"] for r in out.collect()) == ROWS  # each row once, none lost


def test_a_wrong_token_fails_naming_unauthenticated(spark: SparkSession, mesh: Mesh, pki: Path):
    before = exported(mesh, pki, "echo")
    df = spark.createDataFrame([("refused",)], ["line"])
    with pytest.raises(Exception) as err:
        df.write.format("tuplemesh").options(**secured(pki, "wrong")).option("targets", targets(mesh)) \
            .option("component", "lines").mode("append").save()  # fmt: skip
    assert "failed: UNAUTHENTICATED" in str(err.value)
    assert "the token must be the worker's admin.token" in str(err.value)
    with pytest.raises(Exception) as err:
        spark.read.format("tuplemesh").options(**secured(pki, "wrong")).option("targets", targets(mesh)) \
            .option("export", "echo").load()  # fmt: skip
    assert "Offsets from 127.0.0.1:" in str(err.value) and "failed: UNAUTHENTICATED" in str(err.value)
    assert exported(mesh, pki, "echo") == before  # the refused write added nothing
