"""What this process runs: the installed version and whether the hot path is compiled.

One place for `tuplemesh --version` and the ``tuplemesh_build_info`` metric, so both say the same.
"""

from __future__ import annotations

from importlib import metadata

from tuplemesh._compiled import compiled_modules

__all__ = ["build", "version"]


def version() -> str:
    try:
        return metadata.version("tuplemesh")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def build() -> str:
    """How the hot path runs in this process: compiled by mypyc, or the pure-Python fallback."""
    compiled = len(compiled_modules())
    return f"compiled: {compiled} modules" if compiled else "pure Python"
