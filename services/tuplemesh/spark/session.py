"""`local_session`: a local Spark session ready for ``format("tuplemesh")``."""

from __future__ import annotations

from typing import Any

from tuplemesh.spark.source import register

__all__ = ["local_session"]


def local_session(app: str, cores: int = 2) -> Any:
    """A quiet ``local[cores]`` session with ``tuplemesh`` registered (examples, tests, benchmarks).

    Sets what a local PySpark needs here: this interpreter for the Python workers, loopback only,
    no UI.
    """
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
