"""Resolve a plugin name through an alias table or a ``"module:attr"`` path (uvicorn's importer)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from tuplemesh.errors import PluginError

__all__ = ["import_from_string", "resolve_plugin"]


def import_from_string(path: str) -> Any:
    """Import ``"package.module:attr.sub"`` and return the attribute; PluginError says what failed."""
    module_name, sep, attrs = path.partition(":")
    if not sep or not module_name or not attrs:
        raise PluginError(f"{path!r} is not of the form 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name and not module_name.startswith(f"{exc.name}."):
            raise  # the module exists but one of *its* imports is missing: show the real error
        raise PluginError(f"could not import module {module_name!r} (from {path!r})") from exc
    obj: Any = module
    for attr in attrs.split("."):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            raise PluginError(f"module {module_name!r} has no attribute {attrs!r} (from {path!r})") from None
    return obj


def resolve_plugin(kind: str, name: str, aliases: Mapping[str, str]) -> Any:
    """Resolve ``name`` (an alias or ``module:attr``) for the config key ``kind``."""
    if not isinstance(name, str):
        raise PluginError(f"{kind}: expected a name, got {name!r}")
    target = aliases.get(name)
    if target is None:
        if ":" not in name:
            known = ", ".join(sorted(aliases))
            raise PluginError(f"{kind}: unknown value {name!r}; known: {known}, or 'module:attr'")
        target = name
    try:
        return import_from_string(target)
    except PluginError as exc:
        raise PluginError(f"{kind}: {exc}") from exc
