"""Spark -> a checkpointed topology -> Spark, exactly once through a SIGKILLed worker.

A streaming query writes lines through the Gateway into ``tests.spark.exactly_once_topology``
(3 worker processes, checkpoints in sqlite), a stateful bolt counts how often it saw each line
and exports ``[line, seen]``, and a second streaming query reads the export into parquet. A
worker is SIGKILLed while lines are being written, started again, and both queries restarted
from their checkpoints: every line must come out exactly once, with ``seen`` 1.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.utils import StreamingQueryException

from tests.fault.harness import reports, write_config
from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.client import GatewayClient
from tuplemesh.spark import local_session

TARGET = "tests.spark.exactly_once_topology:topology"
FILES = 3
LINES = 1500  # per file


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_session("tuplemesh-exactly-once")
    yield session
    session.stop()


def targets(mesh: Mesh) -> str:
    return ",".join(mesh.address(i) for i in range(len(mesh.ports)))


def lines_of(file: int) -> list[str]:
    return [f"file {file} line {i}" for i in range(LINES)]


def write_lines(spark: SparkSession, mesh: Mesh, source: Path, checkpoint: Path) -> Any:
    """Start the writing query: every new file of ``source`` into the ``lines`` IngestSpout."""
    return (
        spark.readStream.option("maxFilesPerTrigger", 1).text(str(source)).writeStream
        .format("tuplemesh").option("targets", targets(mesh)).option("component", "lines")
        .option("batchSize", "100").option("timeout", "20").option("retries", "8")
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )  # fmt: skip


def read_export(spark: SparkSession, mesh: Mesh, out: Path, checkpoint: Path) -> Any:
    """Run the reading query (what is readable now, then stop) from the export into parquet."""
    query = (
        spark.readStream.format("tuplemesh").option("targets", targets(mesh)).option("export", "out")
        .load().writeStream.format("parquet").option("path", str(out))
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    return query


def run_to_the_end(query: Any, restart: Any) -> None:
    """Wait for a writing query; one that failed (its worker died under it) is restarted from
    its checkpoint until it ends without an error."""
    for _ in range(4):
        with contextlib.suppress(StreamingQueryException):
            query.awaitTermination(180)
        if query.exception() is None:
            return
        query = restart()
    raise AssertionError(f"the query kept failing: {query.exception()}")


def readable(mesh: Mesh) -> int:
    """Records the export made readable so far (committed into a checkpoint), read or not."""
    with GatewayClient([mesh.address(i) for i in range(len(mesh.ports))], timeout=10) as client:
        return sum(p.end for p in client.offsets("out").partitions.values())


def seen_so_far(mesh: Mesh) -> int:
    return sum(r["lines"] for r in reports(mesh)["seen"])


def test_every_line_comes_back_exactly_once_through_a_sigkilled_worker(spark: SparkSession, tmp_path: Path):
    source = tmp_path / "in"
    source.mkdir()
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "topology.state.backend": "sqlite",
            "topology.state.sqlite.path": str(tmp_path / "state.sqlite"),
            "topology.state.checkpoint.interval.ms": 200,
        },
    )
    mesh = start_mesh(TARGET, 3, config)
    out, write_cp, read_cp = tmp_path / "out", tmp_path / "write-cp", tmp_path / "read-cp"
    try:
        (source / "part-0.txt").write_text("\n".join(lines_of(0)) + "\n")

        def writer() -> Any:
            return write_lines(spark, mesh, source, write_cp)

        run_to_the_end(writer(), writer)
        # a Publish is answered once the checkpoint with its rows' effect commits
        eventually(lambda: readable(mesh) == LINES, timeout=30, message="file 0 readable")
        read_export(spark, mesh, out, read_cp)  # the reader holds (epoch, offset) per partition

        for file in range(1, FILES):
            (source / f"part-{file}.txt").write_text("\n".join(lines_of(file)) + "\n")
        query = writer()
        eventually(lambda: seen_so_far(mesh) > LINES + 300, timeout=60, message="the second file under way")
        mesh.kill(1)  # its ingest queue, counts and export partition die with it
        restarting = threading.Thread(target=mesh.restart, args=(1,))
        restarting.start()
        run_to_the_end(query, writer)
        restarting.join()
        total = LINES * FILES
        eventually(lambda: readable(mesh) == total, timeout=60, message="every line readable")
        read_export(spark, mesh, out, read_cp)  # from its checkpoint: same epochs, same offsets
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]
    rows = spark.read.parquet(str(out)).collect()
    came_out = Counter(row["line"] for row in rows)
    expected = Counter(line for file in range(FILES) for line in lines_of(file))
    assert came_out - expected == Counter(), "lines that came out more than once (or never went in)"
    assert expected - came_out == Counter(), "lines lost"
    assert {row["seen"] for row in rows} == {1}  # no line's effect reached the state twice
