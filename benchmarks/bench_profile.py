"""Where the time goes: a cProfile of `ck.create` alternating with git's own steps, and
helpers to summarise a profile (shared with `bench_check`).

Not tests: pytest never collects these files (`bench_*.py`); `benchmarks/run.sh` runs them.
"""

from __future__ import annotations

import cProfile
import functools
import io
import math
import os
import pstats
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

from bench_lib import GitCheckpoint, Mutator, alternate, median, timed

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer


# -- profile of ck.create -----------------------------------------------------------------


def git_subcommand(argv: Sequence[str]) -> str:
    args = list(argv[1:])
    while args and args[0] in ("-c", "-C"):
        args = args[2:]
    return "git " + " ".join(args[:2]) if args else "git"


def frame_label(key: tuple[str, int, str]) -> str:
    path, line, func = key
    if path == "~":
        return func
    if "git_agentckpt/" in path:
        path = "git_agentckpt/" + path.split("git_agentckpt/", 1)[1]
    else:
        path = os.path.basename(path)
    return f"{path}:{line} {func}"


def _hotspots(stats: pstats.Stats, rounds: int) -> list[str]:
    """The calls that dominate `ck.create`: by self time, and our functions by cumulative."""
    entries: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    rows = [
        (key, nc, tt * 1000 / rounds, ct * 1000 / rounds)
        for key, (_, nc, tt, ct, _) in entries.items()
    ]
    by_self = sorted(rows, key=lambda r: r[2], reverse=True)[:8]
    # the entry points (api / store `create`, `_create_once`) are the whole call: skip them
    ours = [
        r for r in rows if "git_agentckpt/" in r[0][0] and r[0][2] not in ("create", "_create_once")
    ]
    by_cum = sorted(ours, key=lambda r: r[3], reverse=True)[:12]
    out = ["", "Heaviest by self time (ms per create; `poll` is waiting for git):", ""]
    out += ["| call | calls per create | self ms | cumulative ms |", "|---|---:|---:|---:|"]
    out += [
        f"| `{frame_label(k)}` | {nc / rounds:.0f} | {tt:.2f} | {ct:.2f} |"
        for k, nc, tt, ct in by_self
    ]
    out += ["", "Our functions by cumulative time (ms per create):", ""]
    out += ["| function | calls per create | cumulative ms |", "|---|---:|---:|"]
    out += [f"| `{frame_label(k)}` | {nc / rounds:.0f} | {ct:.2f} |" for k, nc, _, ct in by_cum]
    return out


def profile_create(
    ck: Checkpointer, gck: GitCheckpoint, mut: Mutator, rounds: int, out: Path
) -> tuple[str, dict[str, Any]]:
    """cProfile of `ck.create`, the wall time of every subprocess it starts, and git's
    own steps in the same rounds (alternating, not profiled)."""
    real_run = subprocess.run
    calls: list[tuple[str, float]] = []

    def recording_run(*args: Any, **kwargs: Any) -> Any:
        argv = args[0] if args else kwargs.get("args", [])
        label = git_subcommand(argv) if argv and argv[0] == "git" else str(argv[:1])
        result: list[Any] = []
        ms = timed(lambda: result.append(real_run(*args, **kwargs)))
        calls.append((label, ms))
        return result[0]

    prof = cProfile.Profile()
    totals: list[float] = []
    per_call: dict[str, list[float]] = defaultdict(list)
    git_steps: dict[str, list[float]] = defaultdict(list)

    def ours(i: int) -> None:
        calls.clear()
        prof.enable()
        totals.append(timed(functools.partial(ck.create, task="bench", message=f"prof {i}")))
        prof.disable()
        seen: dict[str, float] = defaultdict(float)
        for label, ms in calls:
            seen[label] += ms
        for label, ms in seen.items():
            per_call[label].append(ms)
        per_call["all subprocesses"].append(sum(ms for _, ms in calls))

    def theirs() -> None:
        gck.run()
        for k, v in gck.last_steps.items():
            git_steps[k].append(v)
        git_steps["total"].append(sum(gck.last_steps.values()))

    with mock.patch.object(subprocess, "run", recording_run):
        for i in range(rounds):
            mut.step()
            alternate(i, functools.partial(ours, i), theirs)
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)
    out.write_text(buf.getvalue())
    med_total = median(totals)
    parts = {k: median(v) for k, v in sorted(per_call.items())}
    parts["python (not in a subprocess)"] = med_total - parts.get("all subprocesses", 0.0)
    git_med = {k: median(v) for k, v in git_steps.items()}
    pairs = {"git add -A": "add -A", "git write-tree": "write-tree"}
    lines = [
        "",
        f"## Where `ck.create` spends its time ({rounds} profiled rounds, alternating with git; "
        "median wall ms)",
        "",
        "| part | ours | git's equivalent |",
        "|---|---:|---:|",
        f"| total | {med_total:.1f} | {git_med.get('total', math.nan):.1f} |",
    ]
    for k, v in parts.items():
        g = git_med.get(pairs.get(k, ""))
        lines.append(f"| {k} | {v:.1f} | {'' if g is None else f'{g:.1f}'} |")
    lines.append(
        f"| git commit-tree + update-ref | | "
        f"{git_med.get('commit-tree', 0.0) + git_med.get('update-ref', 0.0):.1f} |"
    )
    lines += _hotspots(stats, rounds)
    lines += ["", f"(cProfile of ours: `{out.name}`; totals include profiler overhead.)"]
    doc = {
        "total_ms": round(med_total, 3),
        "parts_ms": {k: round(v, 3) for k, v in parts.items()},
        "git_steps_ms": {k: round(v, 3) for k, v in git_med.items()},
    }
    return "\n".join(lines) + "\n", doc
