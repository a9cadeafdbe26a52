"""Builds tuplemesh with its hot modules compiled by mypyc; pyproject.toml holds the metadata.

The modules listed in ``tuplemesh/_compiled.py`` are compiled from the same .py sources the pure
package ships, which stay the fallback: without mypyc, with TUPLEMESH_PURE_PYTHON set, or when
compilation fails (one warning line), the pure package is built.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SOURCE_ROOT = HERE / "services"
_COMPILED = runpy.run_path(str(SOURCE_ROOT / "tuplemesh" / "_compiled.py"))


def compiled_sources() -> list[str]:
    """The .py files of the compiled modules, relative to this directory (what mypyc is given)."""
    return [
        str((SOURCE_ROOT / (name.replace(".", "/") + ".py")).relative_to(HERE))
        for name in _COMPILED["COMPILED_MODULES"]
    ]


def extension_modules() -> list:
    if os.environ.get(_COMPILED["PURE_PYTHON_ENV"]):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _pure_fallback("mypyc is not installed")
        return []
    # mypy resolves ``tuplemesh.*`` imports from the source root, as the project's mypy config does
    os.environ["MYPYPATH"] = str(SOURCE_ROOT)
    try:
        return mypycify(
            ["--config-file", str(HERE / "pyproject.toml"), *compiled_sources()],
            group_name=_COMPILED["GROUP_NAME"],
        )
    except BaseException as exc:  # mypyc reports type errors with SystemExit
        if isinstance(exc, KeyboardInterrupt):
            raise
        _pure_fallback(f"mypyc cannot compile the hot modules ({exc!r})")
        return []


def _pure_fallback(reason: str) -> None:
    print(f"warning: {reason}; building tuplemesh as pure Python", file=sys.stderr)


class BuildExtOrPure(build_ext):
    """build_ext that falls back to the pure package when the C compilation fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            _pure_fallback(f"compiling the mypyc extension modules failed ({exc})")
            if self.inplace:  # stale extension modules would shadow the .py sources
                for ext in self.extensions:
                    Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)


setup(ext_modules=extension_modules(), cmdclass={"build_ext": BuildExtOrPure})
