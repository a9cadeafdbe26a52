"""The tuplemesh PySpark data source with a local Spark session (local[2], one per module)
against real worker processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import StreamingQueryException

from tests.helpers import child_pythonpath, eventually
from tests.worker.conftest import Mesh, start_mesh, wait_serving
from tuplemesh.client import GatewayClient
from tuplemesh.spark import local_session
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc

ACKING = {"TUPLEMESH_TOPOLOGY_ACKER_EXECUTORS": "1"}
CORPUS = [f"line {i} of the corpus with word{i % 17} and word{i % 5}" for i in range(600)]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_session("tuplemesh-tests")
    yield session
    session.stop()


def targets(mesh: Mesh) -> str:
    return ",".join(mesh.address(i) for i in range(len(mesh.ports)))


def offsets(mesh: Mesh, export: str) -> dict[int, tuple[int, int]]:
    found = {}
    for i in range(len(mesh.ports)):
        stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(mesh.address(i)))
        try:
            answer = stub.Offsets(gateway_pb2.OffsetsRequest(export=export))
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND  # no partition on that worker
            continue
        for p in answer.partitions:
            found[p.partition] = (p.start, p.end)
    return found


def wait_records(mesh: Mesh, export: str, total: int, timeout: float = 30) -> None:
    eventually(
        lambda: sum(e - s for s, e in offsets(mesh, export).values()) >= total,
        timeout,
        0.1,
        f"export {export!r} holds {total} records",
    )


def test_batch_write_and_read_round_trip(spark: SparkSession):
    mesh = start_mesh("examples.pipeline:topology", 2)
    try:
        lines = spark.createDataFrame([(line,) for line in CORPUS], ["line"]).repartition(3)
        lines.write.format("tuplemesh").option("targets", targets(mesh)).option("component", "lines") \
            .option("batchSize", "50").mode("append").save()  # fmt: skip
        words = lines.select(F.explode(F.split("line", " ")).alias("word"))
        expected = {r["word"]: r["count"] for r in words.groupBy("word").count().collect()}
        wait_records(mesh, "counts", sum(expected.values()))
        out = (
            spark.read.format("tuplemesh").option("targets", targets(mesh)).option("export", "counts").load()
        )
        assert [f.name for f in out.schema.fields] == ["word", "count"]
        assert out.count() == sum(expected.values())
        got = {
            r["word"]: r["final"] for r in out.groupBy("word").agg(F.max("count").alias("final")).collect()
        }
        assert got == expected
    finally:
        assert mesh.stop() == [0, 0]


def test_stream_reader_restarts_from_its_checkpoint(spark: SparkSession, tmp_path: Path):
    mesh = start_mesh("tests.spark.topologies:echo", 2)
    stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(mesh.address(0)))

    def publish(rows: list[str]) -> None:
        for row in rows:
            stub.PublishOne(gateway_pb2.PublishOneRequest(component="lines", values_json=f'["{row}"]'))

    def run_query() -> None:
        query = (
            spark.readStream.format("tuplemesh").option("targets", targets(mesh))
            .option("export", "echo").load()
            .writeStream.format("parquet").option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination(120)
        assert query.exception() is None

    try:
        first = [f"first-{i}" for i in range(40)]
        publish(first)
        wait_records(mesh, "echo", 40)
        run_query()
        assert sorted(r["line"] for r in spark.read.parquet(str(tmp_path / "out")).collect()) == sorted(first)
        second = [f"second-{i}" for i in range(25)]
        publish(second)
        wait_records(mesh, "echo", 25)
        run_query()  # a new query from the same checkpoint: continues after what it already read
        lines = [r["line"] for r in spark.read.parquet(str(tmp_path / "out")).collect()]
        assert sorted(lines) == sorted(first + second) and len(lines) == 65  # nothing lost or repeated
        # Spark commits a batch's offsets when it plans the next one: the restarted query committed
        # the first run's 40, and the export log let them go
        [(start, end)] = offsets(mesh, "echo").values()
        assert start >= 40 and end == 65
    finally:
        assert mesh.stop() == [0, 0]


def read_back(spark: SparkSession, mesh: Mesh, export: str) -> Counter[str]:
    """How often each line is in the export, read with Spark."""
    out = spark.read.format("tuplemesh").option("targets", targets(mesh)).option("export", export).load()
    return Counter(r["line"] for r in out.collect())


def test_a_replayed_micro_batch_has_its_effect_exactly_once(spark: SparkSession, tmp_path: Path):
    """Spark -> topology -> Spark with acking on: a micro-batch Spark runs again after a crash
    between its write and its commit is recognised, and every row comes back exactly once."""
    mesh = start_mesh("tests.spark.topologies:echo", 2, env=ACKING)
    source = tmp_path / "in"
    source.mkdir()
    rows = [f"streamed-{i}" for i in range(120)]
    (source / "part-0.txt").write_text("\n".join(rows[:70]) + "\n")
    try:

        def run() -> None:
            query = (
                spark.readStream.option("maxFilesPerTrigger", 1).text(str(source)).writeStream
                .format("tuplemesh").option("targets", targets(mesh)).option("component", "lines")
                .option("batchSize", "20").option("checkpointLocation", str(tmp_path / "cp"))
                .trigger(availableNow=True).start()
            )  # fmt: skip
            query.awaitTermination(120)
            assert query.exception() is None

        run()
        (source / "part-1.txt").write_text("\n".join(rows[70:]) + "\n")
        run()  # a second micro-batch, the one replayed below
        # With acking on, a write's task ended only once its rows were exported: no waiting here.
        assert read_back(spark, mesh, "echo") == Counter(rows)
        # replay the last micro-batch as Spark does after a crash between write and commit
        commits = tmp_path / "cp" / "commits"
        last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        assert last == 1
        (commits / str(last)).unlink()
        (commits / f".{last}.crc").unlink(missing_ok=True)
        run()
        assert (commits / str(last)).exists()  # the batch ran again and committed
        # deliberate: a republished row would reach the export log within this window
        time.sleep(1.0)
        assert read_back(spark, mesh, "echo") == Counter(rows)  # each row's effect exactly once
    finally:
        assert mesh.stop() == [0, 0]


def stream_to_parquet(spark: SparkSession, mesh: Mesh, tmp_path: Path, **options: str) -> Any:
    """Run an AvailableNow query from the echo export into parquet (one checkpoint per tmp_path);
    returns the finished query."""
    reader = spark.readStream.format("tuplemesh").option("targets", targets(mesh)).option("export", "echo")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load().writeStream.format("parquet").option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )  # fmt: skip
    with contextlib.suppress(StreamingQueryException):  # the caller asks query.exception()
        query.awaitTermination(120)
    return query


def test_a_log_restarted_at_0_below_the_checkpoint_fails_the_query_or_is_read_from_its_start(
    spark: SparkSession, tmp_path: Path
):
    mesh = start_mesh("tests.spark.topologies:echo", 1)
    try:
        with GatewayClient(targets(mesh)) as client:
            client.publish("lines", [[f"old-{i}"] for i in range(40)])
            wait_records(mesh, "echo", 40)
            query = stream_to_parquet(spark, mesh, tmp_path, maxRecordsPerTrigger="15")
            assert query.exception() is None
            # 40 records at most 15 per micro-batch: 3 batches (15, 15, 10)
            commits = tmp_path / "checkpoint" / "commits"
            assert sorted(p.name for p in commits.iterdir() if p.name.isdigit()) == ["0", "1", "2"]
            [old] = client.offsets("echo").partitions.values()
            mesh.kill(0)
            mesh.restart(0)  # a new log: offsets from 0 again, below the query's 40
            client.publish("lines", [[f"new-{i}"] for i in range(5)])
            wait_records(mesh, "echo", 5)
            [new] = client.offsets("echo").partitions.values()
            assert (new.start, new.end) == (0, 5) and new.epoch != old.epoch
            failed = stream_to_parquet(spark, mesh, tmp_path)
            assert failed.exception() is not None
            message = str(failed.exception())
            assert f"belongs to log epoch {old.epoch}, the log now has epoch {new.epoch}" in message
            assert "query's offset 40" in message and "failOnDataLoss" in message
            went_on = stream_to_parquet(spark, mesh, tmp_path, failOnDataLoss="false")
            assert went_on.exception() is None

            def batch_read(starting: str) -> list[str]:
                out = spark.read.format("tuplemesh").option("targets", targets(mesh)) \
                    .option("export", "echo").option("startingOffsets", starting).load()  # fmt: skip
                return sorted(r["line"] for r in out.collect())

            assert batch_read('{"0": 3}') == ["new-3", "new-4"]
            assert batch_read("latest") == []
        lines = [r["line"] for r in spark.read.parquet(str(tmp_path / "out")).collect()]
        expected = [f"old-{i}" for i in range(40)] + [f"new-{i}" for i in range(5)]
        assert sorted(lines) == sorted(expected)  # the new log read from its start; nothing twice
    finally:
        assert mesh.stop() == [0]


def test_worker_restarted_during_a_write(spark: SparkSession, tmp_path: Path):
    mesh = start_mesh("tests.spark.topologies:echo", 2)
    rows = [f"row-{i:05d}" for i in range(20_000)]
    df = spark.createDataFrame([(r,) for r in rows], ["line"]).repartition(4)
    restarted: list[str] = []

    def restart_worker_1_mid_write() -> None:
        # (Spark runs on the main thread: a data source registered in a session is not seen from
        # a query started on another Python thread.)
        try:
            wait_records(mesh, "echo", 2_000, 120)
            mesh.procs[1].send_signal(signal.SIGTERM)  # a graceful restart, as Kubernetes does
            assert mesh.procs[1].wait(60) == 0
            env = {**os.environ, "PYTHONPATH": child_pythonpath(),
                   "TUPLEMESH_METRICS_PORT": str(mesh.metrics_ports[1])}  # fmt: skip
            peers = ",".join(f"127.0.0.1:{p}" for p in mesh.ports)
            mesh.procs[1] = subprocess.Popen(
                [sys.executable, "-m", "tuplemesh.cli", "worker", "tests.spark.topologies:echo",
                 "--index", "1", "--workers", "2", "--port", str(mesh.ports[1]), "--peers", peers],
                env=env,
            )  # fmt: skip
            wait_serving(mesh, 1)
            restarted.append("yes")
        except BaseException as exc:  # reported by the assertion below
            restarted.append(repr(exc))

    helper = threading.Thread(target=restart_worker_1_mid_write)
    try:
        helper.start()
        df.write.format("tuplemesh").option("targets", targets(mesh)).option("component", "lines") \
            .option("batchSize", "20").mode("append").save()  # fmt: skip
        helper.join(120)
        assert restarted == ["yes"]
        wait_records(mesh, "echo", len(rows), 60)
        out = spark.read.format("tuplemesh").option("targets", targets(mesh)).option("export", "echo").load()
        received = Counter(r["line"] for r in out.collect())
        assert set(received) == set(rows)  # every row arrived
        duplicates = sum(received.values()) - len(rows)  # rows worker 1 took before it left, sent again
        print(f"rows {len(rows)}, received {sum(received.values())}, duplicates {duplicates}")
    finally:
        helper.join(5)
        assert mesh.stop() == [0, 0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"component": "lines"}, "option 'targets' is required"),
        ({"targets": "127.0.0.1:1", "component": "lines", "colour": "red"}, "unknown option(s) ['colour']"),
        (
            {"targets": "127.0.0.1:1", "component": "lines", "batchSize": "many"},
            "option 'batchSize' must be a number",
        ),
        ({"targets": "nowhere", "component": "lines"}, "entry 'nowhere' is not HOST:PORT"),
        ({"targets": "127.0.0.1:1"}, "writing needs option 'component'"),
        (
            {"targets": "127.0.0.1:1", "component": "lines", "columns": "nope"},
            "option 'columns' names ['nope']",
        ),
    ],
)
def test_bad_options_are_errors_naming_them(spark: SparkSession, options: dict[str, str], message: str):
    writer = spark.createDataFrame([("x",)], ["line"]).write.format("tuplemesh").mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(Exception) as err:
        writer.save()
    assert message in str(err.value)
