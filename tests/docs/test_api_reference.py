"""The API reference has an entry for every public name and every public method of a public class.

The site is built as ``make docs`` builds it and its inventory (``objects.inv``, what Sphinx
registered for every documented object) is read back. The public names are the ``__all__`` of
the public modules, read from the pure sources in a fresh interpreter, as the reference is.
A method inherited from a base class counts as documented where that base is documented.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from types import FunctionType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: The modules whose ``__all__`` is tuplemesh's public API.
PUBLIC_MODULES = (
    "tuplemesh",
    "tuplemesh.topology",
    "tuplemesh.worker.local_cluster",
    "tuplemesh.state",
    "tuplemesh.windowing",
    "tuplemesh.gateway",
    "tuplemesh.client",
    "tuplemesh.spark",
    "tuplemesh.acking",
    "tuplemesh.config",
    "tuplemesh.errors",
    "tuplemesh.plugin_api",
    "tuplemesh.transport",
    "tuplemesh.disruptor",
)

#: Packages with an ``__all__`` that are the runtime's own, not an API users program against.
INTERNAL_PACKAGES = {
    "tuplemesh.discovery": "peer discovery, configured by flags and keys",
    "tuplemesh.metrics": "the Prometheus collector, read by scraping /metrics",
    "tuplemesh.server": "the worker process, run by `tuplemesh worker`",
    "tuplemesh.ticks": "tick tuples, a worker feature turned on by topology.tick.tuple.freq.secs",
    "tuplemesh.hotkeys": "hot keys, a worker feature read through Admin/HotKeys, the web UI and /metrics",
    "tuplemesh.sampling": "live tuple samples, a worker feature read through Admin.WatchTuples",
    "tuplemesh.batchtrace": "execute and emit spans, a worker feature on while a tracer provider is set",
}


def _is_method(value: Any) -> bool:
    return isinstance(value, FunctionType | staticmethod | classmethod | property)


def public_api() -> dict[str, Any]:
    """``names``: every ``module.name`` of the public modules; ``methods``: for every public
    method (or property) of a public class, ``[documented name, canonical name of the class
    that defines it]``. Run in a pure-Python interpreter (see ``main``)."""
    names: list[str] = []
    methods: list[tuple[str, str]] = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            names.append(f"{module_name}.{name}")
            cls = getattr(module, name)
            if not inspect.isclass(cls):
                continue
            for attr in dir(cls):
                if attr.startswith("_"):
                    continue
                owner = next(base for base in cls.__mro__ if attr in vars(base))
                if not owner.__module__.startswith("tuplemesh") or not _is_method(vars(owner)[attr]):
                    continue  # object's, Exception's, a Protocol's machinery; or a plain attribute
                methods.append((f"{module_name}.{name}.{attr}", f"{owner.__module__}.{owner.__qualname__}"))
    return {"names": names, "methods": methods}


def pure_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "services"), "TUPLEMESH_PURE_PYTHON": "1"}


@pytest.fixture(scope="module")
def api() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__], capture_output=True, text=True, env=pure_env(), timeout=120, check=True
    )
    return json.loads(out.stdout)


def read_inventory(path: Path) -> dict[str, str]:
    """Every Python object of a built site's ``objects.inv``: name -> the name it is documented
    under (Sphinx also lists a class under its defining module's name, pointing at its entry)."""
    from sphinx.util.inventory import InventoryFile

    with path.open("rb") as stream:
        inventory = InventoryFile.load(stream, "", lambda base, uri: uri)
    entries: dict[str, str] = {}
    for role, objects in inventory.data.items() if hasattr(inventory, "data") else inventory.items():
        if not role.startswith("py:") or role == "py:module":
            continue
        for name, item in objects.items():
            uri = item.uri if hasattr(item, "uri") else item[2]
            entries[name] = uri.rsplit("#", 1)[-1] if "#" in uri else name
    return entries


@pytest.fixture(scope="module")
def documented(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("api-site")
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        capture_output=True, text=True, env=pure_env(), timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return read_inventory(out / "html" / "objects.inv")


def undocumented(api: dict[str, Any], documented: dict[str, str]) -> list[str]:
    missing = [name for name in api["names"] if name not in documented]
    for name, owner in api["methods"]:
        attr = name.rsplit(".", 1)[1]
        # documented on the class itself, or on the (documented) class that defines it
        if name not in documented and f"{documented.get(owner, owner)}.{attr}" not in documented:
            missing.append(name)
    return missing


def test_every_public_name_and_method_has_an_entry_in_the_reference(api, documented):
    missing = undocumented(api, documented)
    assert not missing, f"no entry in the API reference for {len(missing)} public names: {', '.join(missing)}"


def test_the_public_api_is_what_the_modules_export(api):
    names = set(api["names"])
    # the names a new user went looking for, and their methods
    for name in (
        "topology.BoltDeclarer", "topology.Tuple", "worker.local_cluster.LocalCluster", "gateway.IngestSpout",
        "gateway.ExportBolt", "client.GatewayClient", "state.StatefulBolt", "windowing.WindowedBolt",
        "windowing.StatefulWindowedBolt",
    ):  # fmt: skip
        assert f"tuplemesh.{name}" in names, name
    methods = dict(api["methods"])
    for grouping in ("shuffle", "fields", "all", "global", "direct", "local_or_shuffle", "none", "custom"):
        assert f"tuplemesh.topology.BoltDeclarer.{grouping}_grouping" in methods
    for method in ("emit", "emit_many", "emit_direct", "ack", "fail"):
        assert f"tuplemesh.topology.BoltCollector.{method}" in methods
    assert methods["tuplemesh.state.StatefulBolt.execute"] == "tuplemesh.topology.components.Bolt"


def test_a_missing_entry_is_reported_by_name(api, documented):
    pruned = {name: anchor for name, anchor in documented.items() if "GatewayClient" not in name}
    missing = undocumented(api, pruned)
    assert "tuplemesh.client.GatewayClient" in missing
    assert "tuplemesh.client.GatewayClient.publish" in missing
    inherited = {name: to for name, to in documented.items() if name != "tuplemesh.topology.Bolt.execute"}
    assert "tuplemesh.state.StatefulBolt.execute" in undocumented(api, inherited)


def test_every_package_with_an_api_is_public_or_said_to_be_internal():
    packages = {
        ".".join(init.relative_to(ROOT / "services").parent.parts)
        for init in (ROOT / "services" / "tuplemesh").rglob("__init__.py")
        if "__all__" in init.read_text()
    }
    unclassified = packages - set(PUBLIC_MODULES) - set(INTERNAL_PACKAGES)
    assert unclassified == set(), "add each to PUBLIC_MODULES (and the reference) or INTERNAL_PACKAGES"


if __name__ == "__main__":
    print(json.dumps(public_api()))
