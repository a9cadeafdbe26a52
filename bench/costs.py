"""What guaranteed processing and TLS cost, each against the same mesh without it, in the same run.

Both use the e2e benchmark's const spout -> null bolt on 2 worker processes over grpc at full
speed (half of all tuples cross workers). Acking: ``topology.acker.executors: 2`` with every spout
tuple a tracked tree, against acking off. TLS: mutual TLS on every connection (a throwaway CA),
against plaintext.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench.e2e import measure
from bench.records import Record

RELIABLE = "bench.topologies:build_reliable"


def _median_rate(runs: int, seconds: float, **kwargs: object) -> float:
    return statistics.median(measure("grpc", seconds, **kwargs)["rate"] for _ in range(runs))  # type: ignore[arg-type]


def _tls_config(directory: Path) -> Path:
    from tests.pki import make_ca, make_leaf  # the checkout's test helpers (cryptography, a dev dependency)

    make_leaf(directory, "worker", make_ca(directory, "mesh-ca"), worker=True)
    config = directory / "tls.yaml"
    config.write_text(
        "tls.enabled: true\n"
        f"tls.ca.file: {directory / 'mesh-ca.pem'}\n"
        f"tls.cert.file: {directory / 'worker.crt'}\n"
        f"tls.key.file: {directory / 'worker.key'}\n"
    )
    return config


def run(quick: bool = False) -> list[Record]:
    seconds = 2.0 if quick else 5.0
    runs = 1 if quick else 3
    plain = _median_rate(runs, seconds, target=RELIABLE)
    acked = _median_rate(runs, seconds, target=RELIABLE, env={"TUPLEMESH_TOPOLOGY_ACKER_EXECUTORS": "2"})
    with tempfile.TemporaryDirectory() as tmp:
        config = _tls_config(Path(tmp))
        plain_again = _median_rate(runs, seconds)
        tls = _median_rate(runs, seconds, config_path=str(config))
    return [
        Record(
            "costs",
            "const spout -> null bolt, 2 processes over grpc, acking on (2 ackers, every tuple tracked)",
            "tuples",
            acked,
            {"the same with acking off, this run": plain},
            "acking costs <= 35% (ratio >= 0.65)",
        ),
        Record(
            "costs",
            "const spout -> null bolt, 2 processes over grpc, mutual TLS on every connection",
            "tuples",
            tls,
            {"the same in plaintext, this run": plain_again},
            "TLS costs <= 20% (ratio >= 0.8)",
        ),
    ]
