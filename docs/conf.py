"""Sphinx configuration of the tuplemesh documentation site (``make docs`` builds it into _build).

Sphinx with myst-parser reads the Markdown pages as they are, and keeps this file inside docs/ so
the repository's top level stays as it is. The API reference is generated from the docstrings of
the checkout's own sources, not of an installed copy.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT / "services"), str(DOCS / "_ext")]
# The reference documents the .py sources, also in a checkout whose hot modules are compiled
# (a compiled class carries no source order and no slots to list).
os.environ.setdefault("TUPLEMESH_PURE_PYTHON", "1")

project = "tuplemesh"
author = "the tuplemesh authors"
copyright = "the tuplemesh authors, Apache-2.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "benchplots"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# configuration.head.md is the hand-written head of the generated configuration.md, not a page
exclude_patterns = ["_build", "configuration.head.md", "README.md"]

myst_heading_anchors = 3  # links such as operations.md#backpressure-per-task resolve to headings
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Every public member gets an entry, with or without a docstring of its own; the members of
# ``__all__`` are documented where a page names their module (tests/docs/test_api_reference.py).
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}

# Where the benchmark plots come from: the committed reference run, and the checkout's latest
# `make bench` if there is one; `-D bench_results=PATH` (or bench_reference) reads another file.
bench_reference = str(DOCS / "bench" / "reference.json")
bench_results = str(ROOT / "bench" / "results.json")

html_theme = "furo"
html_title = "tuplemesh"
html_static_path = ["_static"]


def _drop_builtin_docstrings(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """A constant or alias without a ``#:`` comment would show its type's docstring (``int``'s,
    ``tuple``'s): leave its entry to the page's own words instead."""
    if what not in ("data", "attribute"):
        return
    text = inspect.cleandoc("\n".join(lines)).strip()
    for source in (type(obj), getattr(obj, "__origin__", None)):
        doc = inspect.getdoc(source) if source is not None else None
        if doc and text.startswith(inspect.cleandoc(doc).strip()[:60]):
            lines.clear()
            return


def setup(app: Any) -> None:
    app.connect("autodoc-process-docstring", _drop_builtin_docstrings)
