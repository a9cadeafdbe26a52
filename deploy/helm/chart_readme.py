"""Writes the chart's README.md from Chart.yaml and the `# --` comments of values.yaml.

Run it after changing values.yaml:  python deploy/helm/chart_readme.py  (``--check`` only compares).
A value documented with ``# --`` gets a row; once one key of a mapping is documented, all its keys
must be, so a new value cannot slip in without a description.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent / "tuplemesh"
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-]+):(?:\s|$)")
DOC_START = re.compile(r"^ *# -- ?(?P<text>.*)$")
DOC_MORE = re.compile(r"^ *#(?: (?P<text>.*))?$")

HEADER = """\
# {name}

{description}

Chart version {version}, application version {appVersion}. Kubernetes {kubeVersion}.

This file is generated from `values.yaml` by `deploy/helm/chart_readme.py`; edit the comments
there and run the script.

## Install

The chart has no default image: build `deploy/Dockerfile` (with your topology installed, or
give its source in `topology.source`) and push it to a registry your cluster pulls from.

```
helm install mesh deploy/helm/tuplemesh -n streams --create-namespace \\
  --set image.repository=registry.example/tuplemesh --set image.tag={appVersion}
```

Secrets never go through the chart's values or its ConfigMap: the Admin/Gateway token
(`admin.existingSecret`), the redis password (`state.redis.existingSecret`) and the TLS
material (`tls.secretName`) are read from Secrets you create. The schema refuses unknown values,
so a misspelt key fails `helm install` instead of being ignored.

## Values

| Key | Type | Default | Description |
|---|---|---|---|
"""


@dataclass(frozen=True)
class ValueDoc:
    """One documented value: its dotted path and its description."""

    path: tuple[str, ...]
    description: str


def documented_values(values_text: str) -> list[ValueDoc]:
    """The ``# --`` documented keys of values.yaml, in file order."""
    docs: list[ValueDoc] = []
    pending: list[str] | None = None
    stack: list[tuple[int, str]] = []
    for line in values_text.splitlines():
        start = DOC_START.match(line)
        if start:
            pending = [start["text"].strip()]
            continue
        more = DOC_MORE.match(line)
        if more:
            if pending is not None:
                pending.append((more["text"] or "").strip())
            continue
        key = KEY_LINE.match(line)
        if key:
            indent = len(key["indent"])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, key["key"]))
            if pending is not None:
                docs.append(ValueDoc(tuple(k for _, k in stack), " ".join(t for t in pending if t)))
        pending = None
    return docs


def _lookup(values: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        values = values[key]
    return values


def undocumented(values: dict[str, Any], docs: list[ValueDoc]) -> list[str]:
    """Keys left without a description in a mapping where some key has one."""
    documented = {doc.path for doc in docs}
    parents = {doc.path[:-1] for doc in docs}
    missing = []
    for parent in sorted(parents):
        for key in _lookup(values, parent):
            if (*parent, key) not in documented:
                missing.append(".".join((*parent, key)))
    return missing


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def _cell(text: str) -> str:
    """Table-safe text: pipes escaped, and angle brackets outside code spans kept from being HTML."""
    parts = text.replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def render_readme(chart: Path = CHART) -> str:
    """The README text for the chart at ``chart``; ValueError names values left undocumented."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    values_text = (chart / "values.yaml").read_text()
    values = yaml.safe_load(values_text)
    docs = documented_values(values_text)
    missing = undocumented(values, docs)
    if missing:
        raise ValueError(f"values.yaml: no '# --' description for {', '.join(missing)}")
    sections = {doc.path[:-1] for doc in docs}
    rows = []
    for doc in docs:
        value = _lookup(values, doc.path)
        is_section = doc.path in sections
        default = (
            "" if is_section else "`" + json.dumps(value, separators=(", ", ": ")).replace("|", "\\|") + "`"
        )
        rows.append(
            f"| `{'.'.join(doc.path)}` | {_type_name(value)} | {default} | {_cell(doc.description)} |"
        )
    return HEADER.format(**meta) + "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    readme = CHART / "README.md"
    text = render_readme()
    if "--check" in argv:
        if readme.read_text() != text:
            print(f"{readme} is stale: run python {__file__}", file=sys.stderr)
            return 1
        return 0
    readme.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
