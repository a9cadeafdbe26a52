"""Fixtures the security tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pki import make_ca, make_leaf


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mesh CA with a worker certificate (the worker role) and a client one (no worker role:
    what Admin, Gateway and Spark clients get)."""
    d = tmp_path_factory.mktemp("pki")
    mesh_ca = make_ca(d, "mesh-ca")
    make_leaf(d, "worker", mesh_ca, worker=True)
    make_leaf(d, "client", mesh_ca)
    return d
