"""The docs site builds offline with warnings as errors, has every page, draws the benchmark
plots from a results file, and says so instead of failing when there is none."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

PAGES = [
    "index", "getting-started", "tutorial", "concepts", "api", "configuration", "guarantees",
    "state", "state-backends", "windows", "spark", "operations", "ui", "benchmarks", "benchmark-plots",
]  # fmt: skip
#: the API reference's pages beside api.html, one or two public modules each
API_PAGES = [
    "local-cluster", "state", "windowing", "gateway", "client", "spark", "acking", "config", "plugins",
    "disruptor", "errors",
]  # fmt: skip

RESULTS = {
    "when": "2026-01-02T03:04:05Z",
    "python": "3.11.7",
    "machine": "x86_64",
    "quick": False,
    "records": [
        {
            "part": "ring",
            "case": "1P->1C, one slot = list of 100",
            "unit": "items",
            "items_per_second": 30_700_000.0,
            "baselines": [
                {"name": "SimpleQueue, one item per put", "items_per_second": 10_100_000.0, "ratio": 3.04}
            ],
            "target": ">= 2x SimpleQueue",
        },
        {
            "part": "wordcount",
            "case": "word count on 2 worker processes",
            "unit": "tuples",
            "tuples_per_second": 137_019.6,
            "baselines": [{"name": "single loop", "tuples_per_second": 886_470.0, "ratio": 0.155}],
            "target": "",
        },
    ],
}


def build(out: Path, results: Path) -> subprocess.CompletedProcess[str]:
    """``make docs``'s build (-W: any warning fails it) into ``out``, plotting ``results``."""
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), "-D", f"bench_results={results}", str(DOCS), str(out / "html")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole site built from scratch (doctrees beside html), plotting RESULTS."""
    tmp = tmp_path_factory.mktemp("site")
    results = tmp / "results.json"
    results.write_text(json.dumps(RESULTS))
    out = build(tmp, results)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return tmp / "html"


def test_every_page_is_built(site: Path):
    for page in PAGES:
        assert (site / f"{page}.html").is_file(), page
    index = (site / "index.html").read_text()
    for page in PAGES[1:]:
        assert f'href="{page}.html"' in index, f"{page} is not in the navigation"
    api = (site / "api.html").read_text()
    for page in API_PAGES:
        assert (site / "api" / f"{page}.html").is_file(), page
        assert f'href="api/{page}.html"' in api, f"api/{page} is not linked from the API reference"


def test_the_api_reference_is_generated_from_the_docstrings(site: Path):
    api = (site / "api.html").read_text()
    for name in ("TopologyBuilder", "Spout", "BasicBolt", "BoltCollector", "TaskContext", "Tuple"):
        assert f'id="tuplemesh.topology.{name}"' in api, name
    # a docstring's own words, not only the signature
    assert "Each task gets its own deep copy" in api


def test_the_data_path_is_drawn_and_the_configuration_is_the_generated_one(site: Path):
    concepts = (site / "concepts.html").read_text()
    assert "data-path.svg" in concepts and (site / "_images" / "data-path.svg").is_file()
    assert "topology.transfer.batch.size" in (site / "configuration.html").read_text()


def test_the_benchmark_plots_are_drawn_from_the_results(site: Path):
    page = (site / "benchmark-plots.html").read_text()
    for part in ("ring", "wordcount"):
        assert f'src="_images/bench-{part}.png"' in page, part
        assert (site / "_images" / f"bench-{part}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2026-01-02T03:04:05Z" in page and "target &gt;= 2x SimpleQueue" in page


@pytest.mark.parametrize("content", [None, "{not json", '{"records": []}'])
def test_without_usable_results_the_plots_page_says_so_and_the_build_passes(
    site: Path, tmp_path: Path, content
):
    """As `make docs` after the results file went missing or bad: the site's build again (a copy of
    it, with the same settings), so the page that reads the results file is read and written anew
    (its dependency changed) while every other page, unchanged, stays as the full build made it."""
    built = site.parent
    for part in ("doctrees", "html"):
        shutil.copytree(built / part, tmp_path / part, symlinks=True)
    results = built / "results.json"  # the file the site was built from: its settings unchanged
    results.unlink(missing_ok=True)
    if content is not None:
        results.write_text(content)
    out = build(tmp_path, results)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    page = (tmp_path / "html" / "benchmark-plots.html").read_text()
    reference, latest = page.split('role="main"')[-1].split('id="your-latest-run"')
    assert "<img" not in latest
    assert "No benchmark" in latest and "make bench" in latest
    # the committed reference run is drawn all the same, with the machine it ran on
    assert_reference_drawn(reference, tmp_path / "html")


def assert_reference_drawn(page: str, site: Path) -> None:
    recorded = json.loads((DOCS / "bench" / "reference.json").read_text())
    parts = {record["part"] for record in recorded["records"]}
    assert {"ring", "hotpath"} <= parts
    for part in parts:
        assert f'src="_images/bench-reference-{part}.png"' in page, part
        assert (site / "_images" / f"bench-reference-{part}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    mode = "hot path compiled" if recorded["compiled"] else "pure Python"
    machine = f"{recorded['cpu']}, {recorded['cores']} cores"
    assert f"Run of {recorded['when']}, Python {recorded['python']} on {machine}" in page and mode in page


def test_the_committed_reference_run_is_drawn_beside_the_latest_one(site: Path):
    page = (site / "benchmark-plots.html").read_text()
    reference, latest = page.split('id="your-latest-run"')
    assert_reference_drawn(reference, site)
    assert 'src="_images/bench-ring.png"' in latest and "bench-reference" not in latest
