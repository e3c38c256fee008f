"""The interruption benchmark, smoke size: two seeds of a three-step task, both drivers
(the CLI and the Claude Code hook entry point), the full recovery and the baseline. It
asserts only that the run completes and prints every figure: the figures themselves are
the benchmark's business (benchmarks/RESULTS.md), not a test's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "interruptions"
FIGURES = (
    "final tree = uninterrupted",
    "redone-work ratio",
    "done steps redone / run",
    "violations after resume / run",
    "runs with a violation",
    "resumes confirmed",
    "metrics: ratio, violations",
)


def test_interruption_benchmark_smoke(tmp_path: Path) -> None:
    args = ["--seeds", "2", "--steps", "3", "--max-interruptions", "2"]
    args += ["--variants", "full,baseline", "--drivers", "cli,claude-code"]
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_interruptions.py"), *args, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    header = next(line for line in out.splitlines() if line.startswith("| driver |"))
    for figure in FIGURES:
        assert figure in header
    rows = [line for line in out.splitlines() if line.startswith(("| cli |", "| claude-code |"))]
    assert [r.split("|")[1:3] for r in rows] == [
        [" cli ", " full "],
        [" cli ", " baseline "],
        [" claude-code ", " full "],
        [" claude-code ", " baseline "],
    ]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 12 and all(cells), row
        assert cells[3] == "2/2", row  # every run finished
    assert (tmp_path / "results.json").exists()
    plotted = "plot written:" in out
    assert plotted or "plot skipped: matplotlib is not installed" in out
    assert plotted == (tmp_path / "interruptions.png").exists()
