"""Builds tuplemesh with its hot modules compiled by mypyc; pyproject.toml holds the metadata.

The modules listed in ``tuplemesh/_compiled.py`` are compiled from the same .py sources the pure
package ships. Every build is compiled unless TUPLEMESH_PURE_PYTHON is set: when mypyc or the C
compiler cannot build the hot modules, the build stops with one line saying why, rather than
quietly shipping a package that runs several times slower.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import NoReturn

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SOURCE_ROOT = HERE / "services"
_COMPILED = runpy.run_path(str(SOURCE_ROOT / "tuplemesh" / "_compiled.py"))
PURE_PYTHON_ENV: str = _COMPILED["PURE_PYTHON_ENV"]


def compiled_sources() -> list[str]:
    """The .py files of the compiled modules, relative to this directory (what mypyc is given)."""
    return [
        str((SOURCE_ROOT / (name.replace(".", "/") + ".py")).relative_to(HERE))
        for name in _COMPILED["COMPILED_MODULES"]
    ]


def _fail(cause: str) -> NoReturn:
    sys.exit(
        f"error: tuplemesh's hot modules cannot be compiled: {cause}; "
        f"to build pure Python on purpose, set {PURE_PYTHON_ENV}=1"
    )


def extension_modules() -> list:
    if os.environ.get(PURE_PYTHON_ENV):
        print(f"note: {PURE_PYTHON_ENV} is set: building tuplemesh as pure Python", file=sys.stderr)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _fail("mypyc is not installed (pip install 'mypy>=1.10')")
    # mypy resolves ``tuplemesh.*`` imports from the source root, as the project's mypy config does
    os.environ["MYPYPATH"] = str(SOURCE_ROOT)
    try:
        return mypycify(
            [
                "--config-file",
                str(HERE / "pyproject.toml"),
                # Optional extras (opentelemetry, ...) are absent from a build environment, which
                # turns the ignores their real types need into unused ones; `make lint` checks them.
                "--no-warn-unused-ignores",
                *compiled_sources(),
            ],
            group_name=_COMPILED["GROUP_NAME"],
        )
    except SystemExit as exc:  # mypy reports its errors (printed above) with SystemExit
        _fail(f"mypy found errors (listed above, exit status {exc.code})")


def named_extensions() -> list[Extension]:
    """The extension modules mypycify makes, by name only, until build_ext runs it.

    mypycify type-checks the compiled modules with mypy and writes their C code (several seconds),
    and a build runs setup.py once per step: pip asks for the build requirements, then for the
    metadata (whose file list finalizes build_ext), then builds the wheel. Only build_ext's run
    compiles; every other step needs only the extensions' names (a wheel with extension modules is
    tagged for this CPython and platform, never py3-none-any). So mypy runs once per build.
    """
    if os.environ.get(PURE_PYTHON_ENV):
        return extension_modules()  # none, with the note saying so
    names = [_COMPILED["GROUP_NAME"] + "__mypyc", *_COMPILED["COMPILED_MODULES"]]
    return [Extension(name, sources=[]) for name in names]


class BuildExtOrFail(build_ext):
    """build_ext that has mypyc make the extension modules it compiles (see ``named_extensions``),
    and whose C compiler failure names its cause and the way to build pure Python."""

    def run(self) -> None:
        if self.extensions and not any(ext.sources for ext in self.extensions):
            made = {ext.name: ext for ext in extension_modules()}
            if made.keys() != {ext.name for ext in self.extensions}:
                _fail(f"mypyc made the extension modules {sorted(made)}, not the ones named before")
            # finalize_options set the build's own attributes on the named ones (full name, file
            # name); mypycify's sources, include dirs and flags go into the same objects
            for ext in self.extensions:
                vars(ext).update(vars(made[ext.name]))
        try:
            super().run()
        except Exception as exc:
            if self.inplace:  # stale extension modules would shadow the .py sources
                for ext in self.extensions:
                    Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            _fail(f"compiling mypyc's C code failed ({exc}; it needs a C compiler and the Python headers)")


setup(ext_modules=named_extensions(), cmdclass={"build_ext": BuildExtOrFail})
