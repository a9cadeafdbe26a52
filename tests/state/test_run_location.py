"""``tuplemesh run`` of a checkpointed topology over worker processes starts from the beginning
every time: its sqlite file is its own, not one left in the working directory by the last run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import child_pythonpath


def test_each_run_checkpoints_into_a_file_of_its_own_and_leaves_none_behind(tmp_path: Path):
    (tmp_path / "tmp").mkdir()
    config = tmp_path / "tuplemesh.yaml"
    # no checkpoint but the final one, taken as the run stops: a run that resumed would resume that
    config.write_text("topology.state.checkpoint.interval.ms: 600000\n")
    env = {
        **os.environ,
        "PYTHONPATH": child_pythonpath(),
        "WORDCOUNT_REPEAT": "20",
        "XDG_STATE_HOME": str(tmp_path / "xdg"),  # where a worker alone would keep its file
        "TMPDIR": str(tmp_path / "tmp"),
    }
    cmd = [sys.executable, "-m", "tuplemesh.cli", "run", "examples.stateful_wordcount:topology",
           "--workers", "2", "--config", str(config), "--json"]  # fmt: skip
    for _ in range(2):
        out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        summary = json.loads(out.stdout)
        assert out.returncode == 0 and summary["matched"] is True, out.stderr
        assert "every task resumes from checkpoint none (the beginning)" in out.stderr
        assert re.search(r"resumes from checkpoint \d", out.stderr) is None, out.stderr
        assert sorted(p.name for p in tmp_path.rglob("*.sqlite*")) == []
        assert list((tmp_path / "tmp").iterdir()) == []  # the run's own directory is gone
