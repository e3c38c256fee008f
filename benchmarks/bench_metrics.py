"""What `git ckpt metrics` costs on a long log (issue 15): the log read once, side by side
with reading the log alone, and what a step pays for the `recovery.metrics` record.

    .venv/bin/python benchmarks/bench_metrics.py                  # ~21k events
    .venv/bin/python benchmarks/bench_metrics.py --calls 100 --rounds 3

The task (through the API): 20 steps of `--calls` x 10 tool calls each (batches of
100), an interrupted step 21, a quota stop, resume, confirm, then 12 steps of 100 tool
calls (the 11th start records the resume's figures). Rows (best of `--rounds`):
`log.read` (every event parsed, oldest first), `metrics` (the facade: the same read
plus every figure), `record_due` with nothing due (what every step start and step
done pay), and the due path (the tail read from the before window, and the figures).
Not a test: pytest never collects it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import git, seal_environment


def best(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def build(repo: Path, calls: int) -> Any:
    import git_agentckpt
    from git_agentckpt.model import NewEvent

    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    ck = git_agentckpt.open(str(repo))
    ck.task_start("t", "goal", [(f"s{i}", f"step {i}") for i in range(1, 41)])

    def tool_calls(step: int, batches: int) -> None:
        for b in range(batches):
            batch = [
                NewEvent("tool.call", data={"tool": "Bash"}, input={"cmd": f"{step} {b} {k}"})
                for k in range(calls)
            ]
            ck.append_events("t", batch)

    for i in range(1, 21):
        ck.step_start("t", f"s{i}")
        tool_calls(i, 10)
        ck.step_done("t", f"s{i}")
    ck.step_start("t", "s21")
    ck.append_events("t", [NewEvent("quota.exceeded", data={"error": "429"})])
    form = str(ck.resume("t").brief.data["restatement_form"])  # type: ignore[union-attr]
    done = ", ".join(f"s{i}" for i in range(1, 21))
    filled = (
        form.replace("<the goal, in your own words>", "goal")
        .replace("<ids of the done steps, or none>", done)
        .replace("<id of the next step, or none>", "s21")
    )
    ck.confirm("t", filled)
    for i in range(21, 33):
        ck.step_start("t", f"s{i}")
        tool_calls(i, 1)
        ck.step_done("t", f"s{i}")
    return git_agentckpt.open(str(repo))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="tool calls per batch")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ckpt-bench-metrics-"))
    seal_environment(root)
    ck = build(root / "repo", args.calls)
    from git_agentckpt.metrics import recording, timeline
    from git_agentckpt.metrics.compute import figures_of
    from git_agentckpt.store.log_index import key_events
    from git_agentckpt.store.refs import TaskName

    t = TaskName("t")
    n = len(ck.log.read(t))
    recorded = sum(1 for e in ck.log.read(t) if e.type == recording.METRICS_EVENT)

    def due_path() -> int:
        key = key_events(ck.log, t)
        spans = [s for s in timeline.find_resumes(key, 10, False) if s.passed]
        pos = min(s.before_start for s in spans)
        events = [*key[:pos], *recording._tail_from(ck, t, key[pos].id)]
        figures_of(ck, t, events, timeline.find_resumes(events, 10, False), 10, set())
        return len(events)

    rows = [
        ("log.read (every event)", best(lambda: ck.log.read(t), args.rounds)),
        ("metrics (facade)", best(lambda: ck.metrics(["t"]), args.rounds)),
        ("record_due, nothing due", best(lambda: recording.record_due(ck, t), args.rounds)),
        (f"due path ({due_path()} events read)", best(due_path, args.rounds)),
    ]
    print(f"{n} events, {recorded} recovery.metrics event(s), best of {args.rounds}")
    print("| what | ms |\n|---|---:|")
    for name, ms in rows:
        print(f"| {name} | {ms:.2f} |")


if __name__ == "__main__":
    main()
