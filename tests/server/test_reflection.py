"""Every service and message of protos/ (tuplemesh.v1 and the features' own, such as hot keys')
describes through reflection (the real grpcurl)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.worker.conftest import Mesh, start_mesh

GRPCURL = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")
PROTOS = Path(__file__).resolve().parents[2] / "protos"


def declared(kind: str) -> list[str]:
    """Full names of the top-level ``kind`` (message, service) declarations of every proto file."""
    names = []
    for proto in sorted(PROTOS.rglob("*.proto")):
        text = proto.read_text()
        package = re.search(r"^package ([\w.]+);", text, re.M)
        assert package is not None, proto
        names += [f"{package[1]}.{name}" for name in re.findall(rf"^{kind} (\w+)", text, re.M)]
    return names


def describe(mesh: Mesh, symbol: str) -> subprocess.CompletedProcess[str]:
    command = [GRPCURL, "-plaintext", mesh.address(), "describe", symbol]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def mesh() -> Iterator[Mesh]:
    mesh = start_mesh("tests.worker.topologies:small_wordcount", 1)
    yield mesh
    assert mesh.stop() == [0]


def test_the_protos_declare_what_the_test_walks():
    assert declared("service") == [
        "tuplemesh.hotkeys.v1.Admin",  # the calls the hot-keys feature adds to tuplemesh.v1.Admin
        "tuplemesh.v1.Admin",
        "tuplemesh.v1.Gateway",
        "tuplemesh.v1.Transfer",
    ]
    assert "tuplemesh.v1.TransferBatch" in declared("message")
    assert {"tuplemesh.v1.BindingStatus", "tuplemesh.v1.DiscoveryStatus", "tuplemesh.v1.Histogram"} <= set(
        declared("message")
    )
    assert "tuplemesh.v1.UserError" in declared("message")
    assert len(declared("message")) == 47


@pytest.mark.parametrize("kind", ["service", "message"])
def test_every_symbol_describes(mesh: Mesh, kind: str):
    failures = {}
    for symbol in declared(kind):
        out = describe(mesh, symbol)
        if out.returncode != 0 or f"{symbol} is a {kind}" not in out.stdout:
            failures[symbol] = out.stderr.strip() or out.stdout.strip()
    assert failures == {}


def test_transfer_describes_its_stream(mesh: Mesh):
    out = describe(mesh, "tuplemesh.v1.Transfer")
    assert out.returncode == 0, out.stderr
    stream = "rpc Stream ( stream .tuplemesh.v1.TransferBatch ) returns ( stream .tuplemesh.v1.TransferAck )"
    assert stream in out.stdout
