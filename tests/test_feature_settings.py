"""Configuration keys declared by a feature (its registry line's ``settings``): merged into the one
table the first time it is read, validated and set like tuplemesh's own, and refused, naming the
feature's settings, when they repeat a key, lie outside tuplemesh's namespaces or are no
ConfigKey. Reading the configuration imports the settings modules and no feature's running code."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tuplemesh.config import _CORE_KEYS, KEYS, Config, ConfigKey, _KeyTable
from tuplemesh.errors import ConfigError
from tuplemesh.hotkeys.settings import SETTINGS
from tuplemesh.registry import FEATURES, feature_settings

OWN = ConfigKey("topology.example.size", int, 3, "An example feature's size.", unit="items")
EXAMPLE = (OWN,)
REPEATS = (ConfigKey("topology.workers", int, 1, "again"),)
SAME_ENV = (ConfigKey("topology.acker-executors", int, 1, "again"),)
OUTSIDE = [ConfigKey("myapp.size", int, 1, "not ours")]
NOT_A_KEY = ("topology.example.size",)


def line(name: str) -> str:
    return f"{__name__}:{name}"


def test_the_registered_features_keys_are_in_the_table_after_the_core_ones_in_registry_order() -> None:
    names = list(KEYS)
    core = list(_CORE_KEYS)
    declared = [key.name for _, settings in feature_settings() for key in settings]
    assert [name for name, _ in feature_settings()] == [line.settings for line in FEATURES if line.settings]
    assert names == core + declared
    assert [key.name for key in SETTINGS] == [
        "topology.hotkeys.enabled",
        "topology.hotkeys.top.k",
        "topology.hotkeys.sample.every",
        "admin.hotkeys.enabled",
    ]
    assert set(declared) >= {key.name for key in SETTINGS}
    assert not set(core) & {key.name for key in SETTINGS}  # declared by the feature only


def test_a_features_key_is_validated_and_set_from_the_environment_as_a_core_key() -> None:
    conf = Config.load(env={"TUPLEMESH_TOPOLOGY_HOTKEYS_TOP_K": "4"})
    assert conf["topology.hotkeys.top.k"] == 4
    assert conf["topology.hotkeys.sample.every"] == 128  # its declared default
    with pytest.raises(ConfigError, match=r"topology\.hotkeys\.top\.k.*must be 1 or more") as caught:
        Config.load(env={"TUPLEMESH_TOPOLOGY_HOTKEYS_TOP_K": "0"})
    assert "TUPLEMESH_TOPOLOGY_HOTKEYS_TOP_K" in str(caught.value)
    with pytest.raises(ConfigError, match=r"topology\.hotkeys\.enabld"):
        Config({"topology.hotkeys.enabld": True})  # a typo in tuplemesh's namespace


def test_a_table_merges_the_keys_its_feature_lines_declare() -> None:
    table = _KeyTable({"topology.workers": _CORE_KEYS["topology.workers"]}, [line("EXAMPLE")])
    assert list(table) == ["topology.workers", "topology.example.size"]
    assert table["topology.example.size"] is OWN
    assert table.get("topology.nothing") is None
    assert len(table) == 2 and "topology.example.size" in table


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("REPEATS", ValueError, r"declare topology\.workers, already a configuration key"),
        (
            "SAME_ENV",
            ValueError,
            r"declare topology\.acker-executors, already a configuration key \(or its "
            r"environment variable TUPLEMESH_TOPOLOGY_ACKER_EXECUTORS\)",
        ),
        ("OUTSIDE", ValueError, r"declare myapp\.size, outside tuplemesh's namespaces \(topology, "),
        ("NOT_A_KEY", TypeError, r"declare a str, not a ConfigKey"),
    ],
)
def test_a_table_refuses_a_bad_declaration_naming_the_feature_line(
    spec: str, error: type, message: str
) -> None:
    table = _KeyTable(_CORE_KEYS, [line(spec)])
    with pytest.raises(error, match=message) as caught:
        list(table)
    assert line(spec) in str(caught.value)
    with pytest.raises(error):  # and again: a refused table is never half merged
        table["topology.workers"]


def test_settings_that_are_no_sequence_or_do_not_resolve_are_refused_naming_them() -> None:
    with pytest.raises(
        TypeError,
        match=r"feature settings 'tests.test_feature_settings:OWN' are a ConfigKey, not a sequence of "
        r"ConfigKey rows",
    ):
        list(_KeyTable(_CORE_KEYS, [line("OWN")]))
    with pytest.raises(ImportError, match=r"'tests.test_feature_settings:MISSING' does not resolve"):
        list(_KeyTable(_CORE_KEYS, [line("MISSING")]))


def test_a_feature_module_reading_the_configuration_as_it_is_imported_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the table merges by importing the features' modules: one that reads the table while being
    # imported would see it half merged, so that read fails, saying why
    (tmp_path / "reads_keys_on_import.py").write_text(
        "import tests.test_feature_settings as here\n"
        "SIZE = here.TABLE['topology.workers'].default\n"
        "SETTINGS = ()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(globals(), "TABLE", _KeyTable(_CORE_KEYS, ["reads_keys_on_import:SETTINGS"]))
    try:
        with pytest.raises(RuntimeError, match="must not read configuration at import time"):
            list(globals()["TABLE"])
    finally:
        sys.modules.pop("reads_keys_on_import", None)


def test_threads_reading_a_fresh_table_at_once_all_see_the_one_merged_table() -> None:
    table = _KeyTable(_CORE_KEYS, [line("EXAMPLE")])
    start = threading.Barrier(4)
    seen: list[object] = []

    def read() -> None:
        start.wait()
        seen.append(table.merged())

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 4 and all(m is seen[0] for m in seen)
    assert table.merged().env["TUPLEMESH_TOPOLOGY_EXAMPLE_SIZE"] == "topology.example.size"
    assert table.merged().flags["workers"] == "topology.workers"


def test_reading_the_configuration_imports_the_settings_and_no_features_running_code() -> None:
    # a fresh interpreter: what the first read of the table imports, and nothing imported before
    probe = (
        "import sys\n"
        "from tuplemesh.config import KEYS, Config\n"
        "Config({'topology.hotkeys.top.k': 3})\n"
        "assert 'topology.hotkeys.top.k' in KEYS\n"
        "print(sorted(m for m in sys.modules if m.startswith('tuplemesh.') or m == 'grpc'))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    imported = eval(out)  # a list of module names, printed above
    assert "tuplemesh.hotkeys.settings" in imported
    specs = [line.spec.partition(":")[0] for line in FEATURES]
    assert [name for name in imported if name in specs or name == "grpc"] == []
    assert not [name for name in imported if name.startswith(("tuplemesh.worker", "tuplemesh.core.feature"))]
