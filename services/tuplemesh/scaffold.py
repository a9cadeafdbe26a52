"""``tuplemesh new NAME``: write the tutorial's project, ready to test, run, build and deploy.

The project is the tutorial's trending-hashtags topology under the user's package name: the
topology module, its pytest tests on in-process workers, a pyproject, a Dockerfile that compiles
tuplemesh from the source distribution the user builds, the Helm values and a README with the
commands. The files are templates shipped with the package (``templates/new``); ``$name`` and the
other ``string.Template`` placeholders are filled in here.
"""

from __future__ import annotations

import keyword
import re
import sys
from importlib import resources
from pathlib import Path
from string import Template

from tuplemesh import build_info
from tuplemesh.errors import TuplemeshError

__all__ = ["ScaffoldError", "check_name", "new", "write_project"]

#: A Python package name that is also a valid distribution, image and (with "-" for "_") Helm
#: release name: lowercase, starting with a letter, not ending with an underscore.
_NAME = re.compile(r"[a-z](?:[a-z0-9_]*[a-z0-9])?")
#: Helm release names are DNS labels, at most 53 characters.
_MAX_NAME = 53

#: (template under templates/new, path in the project with ``{name}`` for the package directory)
FILES = (
    ("pyproject.toml.tmpl", "pyproject.toml"),
    ("README.md.tmpl", "README.md"),
    ("Dockerfile.tmpl", "Dockerfile"),
    ("deploy/values.yaml.tmpl", "deploy/values.yaml"),
    ("package/__init__.py.tmpl", "{name}/__init__.py"),
    ("package/topology.py.tmpl", "{name}/topology.py"),
    ("tests/test_topology.py.tmpl", "tests/test_topology.py"),
)


class ScaffoldError(TuplemeshError):
    """The project cannot be written: a bad name or an existing path (one line, naming it)."""


def check_name(name: str) -> None:
    """Raise ScaffoldError unless ``name`` can be the package, distribution and release name."""
    if not _NAME.fullmatch(name) or len(name) > _MAX_NAME:
        raise ScaffoldError(
            f"{name!r} is not a valid Python package name for a project: use lowercase letters, "
            f"digits and underscores, starting with a letter (at most {_MAX_NAME} characters)"
        )
    if keyword.iskeyword(name):
        raise ScaffoldError(f"{name!r} is a Python keyword: choose another project name")
    # importing the topology as NAME would find the other module first, or hide it
    taken = {"tuplemesh": "tuplemesh itself", "tests": "the project's tests directory"}
    if name in taken:
        raise ScaffoldError(f"{name!r} is taken by {taken[name]}: choose another project name")
    if name in sys.stdlib_module_names:
        raise ScaffoldError(f"{name!r} is a standard library module: choose another project name")


def _tuplemesh_version() -> str:
    version = build_info.version()
    if version == "unknown":
        raise ScaffoldError(
            "tuplemesh runs from a source tree that was never installed, so its version is unknown: "
            "install it (pip install PATH_TO_TUPLEMESH) and run `tuplemesh new` again"
        )
    return version


def write_project(name: str, parent: Path) -> Path:
    """Write the project ``parent / name``; return its directory. It must not exist yet."""
    check_name(name)
    root = parent / name
    values = {
        "name": name,
        "release": name.replace("_", "-"),
        "tuplemesh_version": _tuplemesh_version(),
    }
    templates = resources.files("tuplemesh") / "templates" / "new"
    # every file rendered before the directory is made: a broken template leaves nothing behind
    texts = {}
    for template, path in FILES:
        text = templates.joinpath(template).read_text(encoding="utf-8")
        texts[path.format(name=name)] = Template(text).substitute(values)
    try:
        root.mkdir()  # fails if anything is there: never write into an existing directory
    except FileExistsError:
        raise ScaffoldError(f"{root} already exists: choose another name or remove it") from None
    except OSError as exc:
        raise ScaffoldError(f"cannot create {root}: {exc.strerror}") from None
    for path, text in texts.items():
        out = root / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return root


def new(name: str, parent: Path | None = None) -> int:
    """The ``tuplemesh new`` command: write the project, say what was written and what comes next."""
    root = write_project(name, Path.cwd() if parent is None else parent)
    print(f"created {root}: the topology {name}.topology:topology, its tests, Dockerfile and Helm values")
    for _, path in FILES:
        print(f"  {name}/{path.format(name=name)}")
    print(f"next: cd {name}, then follow README.md (install, pytest -q, tuplemesh run, the image, Helm)")
    return 0
