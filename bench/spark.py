"""Spark benchmark: rows/s through the tuplemesh sink and source, beside Spark's own rate source
into a noop sink in the same run (local[2], after a warm-up so session start-up is excluded)."""

from __future__ import annotations

import time

from bench.records import Record


def run(quick: bool = False) -> list[Record]:
    from bench.topologies_spark import build
    from tuplemesh.launcher import ProcessCluster
    from tuplemesh.spark import local_session

    n = 200_000 if quick else 1_000_000
    cluster = ProcessCluster("bench.topologies_spark:build", build(), 2, transport="grpc")
    cluster.start()
    spark = None
    try:
        cluster.wait_serving(60)
        targets = ",".join(f"127.0.0.1:{p}" for p in cluster.ports)
        spark = local_session("tuplemesh-bench")

        def write(rows: int) -> float:
            df = spark.range(rows, numPartitions=2).selectExpr("concat('row-', id) AS line")
            start = time.perf_counter()
            df.write.format("tuplemesh").option("targets", targets).option("component", "lines") \
                .option("batchSize", "2000").mode("append").save()  # fmt: skip
            return rows / (time.perf_counter() - start)

        def read(rows: int) -> float:
            start = time.perf_counter()
            spark.read.format("tuplemesh").option("targets", targets).option("export", "echo") \
                .option("batchSize", "5000").load().write.format("noop").mode("overwrite").save()  # fmt: skip
            return rows / (time.perf_counter() - start)

        def rate_noop(rows: int) -> float:
            query = (
                spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows // 2)
                .option("numPartitions", 2).load().writeStream.format("noop")
                .trigger(availableNow=True).start()
            )  # fmt: skip
            start = time.perf_counter()
            query.processAllAvailable()
            query.stop()
            return rows / 2 / (time.perf_counter() - start)

        write(10_000)  # warm-up: Python workers, the data source, the mesh
        sink = write(n)
        deadline = time.monotonic() + 300
        while _exported(cluster) < n + 10_000 and time.monotonic() < deadline:
            time.sleep(0.2)
        source = read(n + 10_000)
        baseline = rate_noop(n)
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
    target = ">= 200k rows/s"
    return [
        Record(
            "spark",
            "sink: Spark -> tuplemesh (Gateway Publish), local[2], 2 workers",
            "rows",
            sink,
            {"Spark rate source -> noop sink": baseline},
            target,
        ),
        Record(
            "spark",
            "source: tuplemesh (Gateway Fetch) -> Spark noop sink, local[2]",
            "rows",
            source,
            {"Spark rate source -> noop sink": baseline},
            target,
        ),
    ]


def _exported(cluster: object) -> int:
    """Records the echo export holds so far (0 while a partition is not reachable yet)."""
    from tuplemesh.client import GatewayClient, GatewayError

    targets = [f"127.0.0.1:{port}" for port in cluster.ports]  # type: ignore[attr-defined]
    with GatewayClient(targets, timeout=5, retries=0) as client:
        try:
            return sum(p.end - p.start for p in client.offsets("echo").partitions.values())
        except GatewayError:
            return 0
