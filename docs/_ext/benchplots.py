"""Sphinx extension: the ``benchmark-plots`` directive draws benchmark results with matplotlib.

``{benchmark-plots} reference`` draws the committed reference run (``bench_reference``,
docs/bench/reference.json); ``{benchmark-plots} results`` draws the checkout's latest
``make bench`` (``bench_results``, bench/results.json). Each benchmark part becomes one
horizontal bar chart: every case's rate beside the baselines measured in the same run, with the
ratio on each baseline's bar, under a line naming the run's date, Python, CPU, cores and whether
the hot path ran compiled. Without a results file (no ``make bench`` yet) or with one that cannot
be read, the directive renders a note saying so and draws nothing: the docs build never fails for
want of benchmark numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

#: where the images go, under the docs source directory (gitignored)
GENERATED = "_generated"


@dataclass(frozen=True)
class Bar:
    label: str
    rate: float
    unit: str
    ratio: float | None  # the case's rate over this baseline's; None for the case itself


def load_results(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The results document, or None and why it cannot be plotted."""
    if not path.is_file():
        return None, f"No benchmark results: {path.name} is absent. `make bench` writes it."
    try:
        doc = json.loads(path.read_text())
        records = doc["records"]
        if not isinstance(records, list):
            raise TypeError("records is not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"No benchmark plots: {path.name} cannot be read ({exc}). `make bench` rewrites it."
    if not records:
        return None, f"No benchmark plots: {path.name} holds no records. `make bench` writes them."
    return doc, ""


def bars_by_part(records: Sequence[Mapping[str, Any]]) -> dict[str, list[list[Bar]]]:
    """part -> one group of bars per case (the case first, then its baselines), in file order.

    A record without a rate (an unexpected shape) is left out rather than failing the build.
    """
    parts: dict[str, list[list[Bar]]] = {}
    for record in records:
        unit = str(record.get("unit", "items"))
        rate = record.get(f"{unit}_per_second")
        if not isinstance(rate, int | float):
            continue
        group = [Bar(str(record.get("case", "?")), float(rate), unit, None)]
        for baseline in record.get("baselines", []):
            base_rate = baseline.get(f"{unit}_per_second")
            if isinstance(base_rate, int | float) and base_rate > 0:
                group.append(Bar(str(baseline.get("name", "?")), float(base_rate), unit, rate / base_rate))
        parts.setdefault(str(record.get("part", "?")), []).append(group)
    return parts


def plot_part(part: str, groups: Sequence[Sequence[Bar]], out: Path) -> Path:
    """Draw one part's cases and baselines into ``out`` (PNG) and return it."""
    import matplotlib

    matplotlib.use("Agg")  # no display: the docs build runs headless
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    labels: list[str] = []
    rates: list[float] = []
    colours: list[str] = []
    notes: list[str] = []
    for group in groups:
        for bar in group:
            is_case = bar.ratio is None
            labels.append(_wrap(bar.label if is_case else f"vs {bar.label}", 48))
            rates.append(bar.rate)
            colours.append("#1f6feb" if is_case else "#9aa4b2")
            ratio = "" if bar.ratio is None else f"  (tuplemesh {bar.ratio:.2f}x)"
            notes.append(f"{_si(bar.rate)} {bar.unit}/s{ratio}")
        labels.append("")  # a gap between cases
        rates.append(0.0)
        colours.append("white")
        notes.append("")
    labels, rates, colours, notes = labels[:-1], rates[:-1], colours[:-1], notes[:-1]

    fig, ax = plt.subplots(figsize=(9, 0.42 * len(labels) + 1.2))
    positions = list(range(len(labels)))[::-1]
    ax.barh(positions, rates, color=colours)
    ax.set_yticks(positions, labels, fontsize=8)
    top = max(rates) if rates else 1.0
    for y, rate, note in zip(positions, rates, notes, strict=True):
        if note:
            ax.text(rate + top * 0.01, y, note, va="center", fontsize=8)
    ax.set_xlim(0, top * 1.7)  # room for the labels beside the longest bar
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _pos: _si(value)))
    ax.set_xlabel("per second (blue: tuplemesh; grey: baselines measured in the same run)")
    ax.set_title(f"{part}")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, metadata={"Software": None})  # no version stamp: same input, same file
    plt.close(fig)
    return out


def _si(value: float) -> str:
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.2f} {suffix}"
    return f"{value:g}"


def _wrap(text: str, width: int) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return "\n".join(lines)


def describe_run(doc: Mapping[str, Any]) -> str:
    """The line above a run's plots: when, on what, and how (compiled or pure Python, quick)."""
    compiled = doc.get("compiled")
    mode = {True: "hot path compiled", False: "pure Python"}.get(compiled, "compiled or pure: not recorded")
    cpu = doc.get("cpu")
    cores = doc.get("cores")
    machine = ", ".join(
        str(item) for item in (cpu, f"{cores} cores" if cores else None, doc.get("machine", "?")) if item
    )
    return (
        f"Run of {doc.get('when', 'an unknown date')}, Python {doc.get('python', '?')} on "
        f"{machine}; {mode}{' (quick mode)' if doc.get('quick') else ''}."
    )


#: directive argument -> (config value naming the file, prefix of the images' names)
SOURCES = {"results": ("bench_results", "bench-"), "reference": ("bench_reference", "bench-reference-")}


class BenchmarkPlots(SphinxDirective):
    """``benchmark-plots [results|reference]``: one figure per benchmark part, or a note when
    there is nothing to plot."""

    has_content = False
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        source = self.arguments[0] if self.arguments else "results"
        if source not in SOURCES:
            raise self.error(f"benchmark-plots: unknown source {source!r}; use one of {sorted(SOURCES)}")
        setting, prefix = SOURCES[source]
        path = Path(getattr(self.config, setting))
        # Re-read this page whenever the results change (or while they are absent).
        self.env.note_dependency(str(path))
        doc, why_not = load_results(path)
        if doc is None:
            note = nodes.note()
            note += nodes.paragraph(text=why_not)
            return [note]
        out: list[nodes.Node] = [nodes.paragraph(text=describe_run(doc))]
        targets = {str(r.get("case")): str(r.get("target", "")) for r in doc["records"]}
        for part, groups in bars_by_part(doc["records"]).items():
            image = plot_part(part, groups, Path(self.env.srcdir) / GENERATED / f"{prefix}{part}.png")
            figure = nodes.figure()
            figure += nodes.image(uri=f"/{GENERATED}/{image.name}", alt=f"benchmark part {part}")
            caption = "; ".join(
                f"{group[0].label}: target {targets[group[0].label]}"
                for group in groups
                if targets.get(group[0].label)
            )
            figure += nodes.caption(text=f"{part}. {caption}" if caption else part)
            out.append(figure)
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("bench_results", "bench/results.json", "env", types=[str])
    app.add_config_value("bench_reference", "docs/bench/reference.json", "env", types=[str])
    app.add_directive("benchmark-plots", BenchmarkPlots)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
