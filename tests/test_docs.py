"""Documentation that is generated from code stays in sync with it."""

from __future__ import annotations

from pathlib import Path

from tuplemesh.config import describe_keys

ROOT = Path(__file__).resolve().parents[1]


def test_configuration_doc_lists_every_key_as_the_code_does():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    assert describe_keys() in doc, "docs/configuration.md is stale: paste the output of `tuplemesh config`"


def test_readme_quick_start_is_make_run_and_make_test():
    readme = (ROOT / "README.md").read_text()
    opening = readme.index("```", readme.index("## Quick start"))
    body = readme[readme.index("\n", opening) + 1 : readme.index("```", opening + 3)]
    commands = [line.strip() for line in body.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
