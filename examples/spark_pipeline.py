"""The Spark pipeline: Spark -> a word-count topology on 3 worker processes -> Spark -> Parquet.

1. Spark reads the text corpus in ``examples/data/``.
2. It writes the lines into the topology's IngestSpout (format ``tuplemesh``, Gateway Publish).
3. The topology (``examples/pipeline.py``) splits and counts; its ExportBolt logs running counts.
4. Spark reads the counts back by offset, keeps each word's final count, and writes Parquet.
5. The result is checked against Spark's own ``groupBy().count()`` over the same corpus.

Run with ``make pipeline``. Exit code 0 only when every count matches.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyspark.sql import functions as F  # noqa: E402

from examples.pipeline import build  # noqa: E402
from tuplemesh.client import GatewayClient  # noqa: E402
from tuplemesh.launcher import ProcessCluster  # noqa: E402
from tuplemesh.spark import local_session  # noqa: E402


def exported_records(cluster: ProcessCluster) -> int:
    """Records the topology's ExportBolt holds, over every partition on every worker."""
    with GatewayClient([f"127.0.0.1:{port}" for port in cluster.ports], timeout=5) as client:
        return sum(p.end - p.start for p in client.offsets("counts").partitions.values())


def main() -> int:
    data = ROOT / "examples" / "data"
    out = ROOT / "build" / "pipeline" / "counts.parquet"
    cluster = ProcessCluster("examples.pipeline:topology", build(), 3, transport="grpc")
    cluster.start()
    spark = None
    try:
        cluster.wait_serving(60)
        targets = ",".join(f"127.0.0.1:{p}" for p in cluster.ports)
        spark = local_session("tuplemesh-pipeline")

        lines = spark.read.text(str(data))
        # the topology's split: lower case, split on whitespace (Python's str.split())
        words = lines.select(F.explode(F.split(F.trim(F.lower("value")), r"\s+")).alias("word"))
        words = words.where("word != ''")
        expected = {r["word"]: r["count"] for r in words.groupBy("word").count().collect()}
        started = time.monotonic()
        lines.write.format("tuplemesh").option("targets", targets).option("component", "lines") \
            .option("columns", "value").mode("append").save()  # fmt: skip
        total = sum(expected.values())
        deadline = time.monotonic() + 120
        while exported_records(cluster) < total:
            if time.monotonic() > deadline:
                print(f"PIPELINE FAILED: the topology exported {exported_records(cluster)} of {total} counts")
                return 1
            time.sleep(0.2)
        counts = spark.read.format("tuplemesh").option("targets", targets).option("export", "counts").load()
        final = counts.groupBy("word").agg(F.max("count").alias("count"))
        final.write.mode("overwrite").parquet(str(out))
        got = {r["word"]: r["count"] for r in spark.read.parquet(str(out)).collect()}
        seconds = time.monotonic() - started
        if got != expected:
            wrong = sorted(w for w in expected.keys() | got.keys() if got.get(w) != expected.get(w))
            print(f"PIPELINE WRONG: {len(wrong)} word(s) differ from Spark's groupBy().count(): {wrong[:5]}")
            return 1
        print(
            f"PIPELINE OK: {lines.count()} lines, {total} words, {len(got)} distinct; the topology's counts "
            f"on 3 workers equal Spark's groupBy().count(); Parquet at {out.relative_to(ROOT)} "
            f"({seconds:.1f} s)"
        )
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
