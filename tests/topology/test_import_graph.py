"""Dependency direction inside the runtime: executors are built from a plan, never from the Worker.

Import cycles across the whole package are checked by tests/test_imports.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tuplemesh

ROOT = Path(tuplemesh.__file__).parent


def test_the_executor_does_not_know_the_worker() -> None:
    source = (ROOT / "worker" / "executor.py").read_text()
    assert "tuplemesh.worker.worker" not in source
    assert "Worker" not in {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
