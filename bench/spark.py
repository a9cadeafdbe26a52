"""Spark benchmark: rows/s through the tuplemesh sink and source, beside Spark's own rate source
into a noop sink in the same run, and each beside the floor of Spark's Python data source API
(a source of ready-made Arrow batches; a sink that reads each batch's values and drops them).
local[2]; every case runs once before it is measured warm (Python workers started, code
loaded), then the cases alternate for a few rounds: medians. The first run of each in the
session is reported apart: there, starting Spark's Python workers weighs more than the rows."""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.records import Record


def run(quick: bool = False) -> list[Record]:
    from bench.topologies_spark import build, floor_sink, floor_source
    from tuplemesh.client import GatewayClient
    from tuplemesh.launcher import ProcessCluster
    from tuplemesh.spark import local_session

    n = 200_000 if quick else 1_000_000
    rounds = 1 if quick else 3
    cluster = ProcessCluster("bench.topologies_spark:build", build(), 2, transport="grpc")
    cluster.start()
    spark = None
    try:
        cluster.wait_serving(60)
        addresses = [f"127.0.0.1:{p}" for p in cluster.ports]
        targets = ",".join(addresses)
        spark = local_session("tuplemesh-bench")
        spark.dataSource.register(floor_source())
        spark.dataSource.register(floor_sink())
        client = GatewayClient(addresses, timeout=30)

        def held() -> int:
            return sum(p.end - p.start for p in client.offsets("echo").partitions.values())

        def write(rows: int) -> float:
            df = spark.range(rows, numPartitions=2).selectExpr("concat('row-', id) AS line")
            expected = held() + rows
            start = time.perf_counter()
            df.write.format("tuplemesh").option("targets", targets).option("component", "lines") \
                .option("batchSize", "2000").mode("append").save()  # fmt: skip
            took = time.perf_counter() - start
            deadline = time.monotonic() + 300
            while held() < expected and time.monotonic() < deadline:  # the sink answers once emitted
                time.sleep(0.05)
            return rows / took

        def read(rows: int) -> float:
            assert held() == rows, f"the export holds {held()} records, expected {rows}"
            start = time.perf_counter()
            spark.read.format("tuplemesh").option("targets", targets).option("export", "echo") \
                .option("batchSize", "5000").load().write.format("noop").mode("overwrite").save()  # fmt: skip
            took = time.perf_counter() - start
            for partition, info in client.offsets("echo").partitions.items():  # read: let go
                client.commit("echo", partition, info.end, epoch=info.epoch)
            return rows / took

        def rate_noop(rows: int) -> float:
            query = (  # availableNow: exactly one micro-batch of rowsPerBatch rows
                spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows)
                .option("numPartitions", 2).load().writeStream.format("noop")
                .trigger(availableNow=True).start()
            )  # fmt: skip
            start = time.perf_counter()
            query.processAllAvailable()
            query.stop()
            return rows / (time.perf_counter() - start)

        def floor(rows: int) -> float:
            start = time.perf_counter()
            spark.read.format("arrowfloor").option("rows", rows).load().write.format("noop") \
                .mode("overwrite").save()  # fmt: skip
            return rows / (time.perf_counter() - start)

        def sink_floor(rows: int) -> float:
            df = spark.range(rows, numPartitions=2).selectExpr("concat('row-', id) AS line")
            start = time.perf_counter()
            df.write.format("arrowfloorsink").mode("append").save()
            return rows / (time.perf_counter() - start)

        # first runs in the session, as a batch job meets them: each case pays for starting its
        # Python workers and loading its code (the sink's are started by a small write first:
        # what the tuplemesh cases share); the source reads the warm-up's rows too
        write(10_000)
        first = {
            "sink": write(n),
            "source": read(10_000 + n),
            "rate": rate_noop(n),
            "floor": floor(n),
            "sink floor": sink_floor(n),
        }
        rates: dict[str, list[float]] = {"sink": [], "source": [], "rate": [], "floor": [], "sink floor": []}
        for _ in range(rounds):  # warm: every case has run before
            rates["sink"].append(write(n))
            rates["source"].append(read(n))
            rates["rate"].append(rate_noop(n))
            rates["floor"].append(floor(n))
            rates["sink floor"].append(sink_floor(n))
        client.close()
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
    median = {case: statistics.median(values) for case, values in rates.items()}
    extra: dict[str, Any] = {"rounds": {case: [round(v) for v in values] for case, values in rates.items()}}
    target = ">= 0.8x Spark's rate source -> noop sink"
    return [
        Record(
            "spark",
            "sink, first run in the session: Spark -> tuplemesh (Gateway Publish), local[2], 2 workers",
            "rows",
            first["sink"],
            {
                "Spark rate source -> noop sink, first run": first["rate"],
                "a Python sink that reads each batch's values and drops them, first run": first["sink floor"],
            },
            target,
        ),
        Record(
            "spark",
            "source, first run in the session: tuplemesh (Gateway Fetch as columns) -> noop sink",
            "rows",
            first["source"],
            {
                "Spark rate source -> noop sink, first run": first["rate"],
                "a Python data source of ready-made Arrow batches -> noop sink, first run": first["floor"],
            },
            target,
        ),
        Record(
            "spark",
            "sink, warm: Spark -> tuplemesh (Gateway Publish), local[2], 2 workers",
            "rows",
            median["sink"],
            {
                "Spark rate source -> noop sink": median["rate"],
                "a Python sink that reads each batch's values and drops them": median["sink floor"],
            },
            target,
            extra,
        ),
        Record(
            "spark",
            "source, warm: tuplemesh (Gateway Fetch as columns) -> noop sink",
            "rows",
            median["source"],
            {
                "Spark rate source -> noop sink": median["rate"],
                "a Python data source of ready-made Arrow batches -> noop sink": median["floor"],
            },
            target,
        ),
    ]
