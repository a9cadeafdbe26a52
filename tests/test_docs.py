"""Documentation that is generated from code stays in sync with it."""

from __future__ import annotations

from pathlib import Path

from tuplemesh.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_configuration_doc_is_its_head_and_the_output_of_tuplemesh_config(capsys):
    assert main(["config"]) == 0
    printed = capsys.readouterr().out
    head = (ROOT / "docs" / "configuration.head.md").read_text()
    doc = (ROOT / "docs" / "configuration.md").read_text()
    assert doc == head + printed, "docs/configuration.md is stale: run `make docs`"


def test_the_configuration_doc_shows_the_unit_of_every_key_that_has_one(capsys):
    from tuplemesh.config import KEYS

    assert main(["config"]) == 0
    rows = {
        line.split(" | ")[0].strip("| `"): line.split(" | ") for line in capsys.readouterr().out.splitlines()
    }
    assert rows["key"][3] == "unit"
    for name, key in KEYS.items():
        assert rows[name][3] == (key.unit or "-"), name
    assert rows["messaging.window.bytes"][3] == "bytes"
    assert rows["topology.batch.flush.interval.millis"][3] == "millis"


def test_readme_quick_start_is_make_run_and_make_test():
    readme = (ROOT / "README.md").read_text()
    opening = readme.index("```", readme.index("## Quick start"))
    body = readme[readme.index("\n", opening) + 1 : readme.index("```", opening + 3)]
    commands = [line.strip() for line in body.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
