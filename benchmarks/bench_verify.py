"""`git ckpt verify` on a long task: is it fast enough to run on every push?

    .venv/bin/python benchmarks/bench_verify.py                        # 500 ckpts, 20k events
    .venv/bin/python benchmarks/bench_verify.py --checkpoints 50 --events 2000 --rounds 3

Builds (through the API, one event per commit, as `git ckpt event` writes them) a task
with `--checkpoints` checkpoints (every 10th full, with 3 files changed; the rest light)
and `--events` tool calls spread between them, then times, in alternation:
- `verify_trail` in-process (every commit rehashed, every event parsed, notes, claims);
- `git ckpt verify TASK` as a CLI process of its own;
- for scale, `git log --first-parent --format=%B` of the same event log (reading the
  messages only, no checking).
Prints medians in ms. Not a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import cli_env, cli_path, git, median, seal_environment


def build(root: Path, n_ckpts: int, n_events: int) -> Path:
    import git_agentckpt
    from git_agentckpt.model import NewEvent
    from git_agentckpt.store.refs import TaskName

    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for i in range(200):
        (repo / f"f{i:03d}.txt").write_text(f"file {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    ck = git_agentckpt.open(str(repo))
    ck.task_start("long", "a long task", [("s1", "read"), ("s2", "change")])
    ck.step_start("long", "s1")
    t = TaskName("long")
    per = max(1, n_events // max(1, n_ckpts))
    for n in range(n_ckpts - 1):  # task_start took the first
        for i in range(per):
            ev = NewEvent("tool.call", input=f"pytest -q tests/test_{i % 50}.py", output="ok")
            ck.log.append(t, [ev])
        full = n % 10 == 0
        if full:
            for k in range(3):
                (repo / f"f{(n + k) % 200:03d}.txt").write_text(f"file changed at {n}\n")
        ck.create("long", message="full" if full else "light", light=not full)
    return repo


def timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoints", type=int, default=500)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-verify-") as tmp:
        root = Path(tmp)
        seal_environment(root)
        started = time.perf_counter()
        repo = build(root, args.checkpoints, args.events)
        print(f"built in {time.perf_counter() - started:.1f} s", file=sys.stderr)

        from git_agentckpt.audit.verify import verify_trail
        from git_agentckpt.git.repo import GitRepo

        gitrepo = GitRepo.discover(str(repo))
        report = verify_trail(gitrepo, ["long"], use_witness=False)
        assert report.ok, report.lines()
        env = cli_env(root, server=False)
        cli = [cli_path(), "verify", "long"]
        log = ["git", "log", "--first-parent", "--format=%B", "refs/agent/events/long"]
        inproc, proc, gitlog = [], [], []
        for _ in range(args.rounds):
            inproc.append(timed_ms(lambda: verify_trail(gitrepo, ["long"], use_witness=False)))
            proc.append(
                timed_ms(
                    lambda: subprocess.run(
                        cli, cwd=repo, env=env, check=True, stdout=subprocess.DEVNULL
                    )
                )
            )
            gitlog.append(
                timed_ms(lambda: subprocess.run(log, cwd=repo, check=True, capture_output=True))
            )
        print(f"trail: {report.checked}")
        print(f"verify in-process       median {median(inproc):8.1f} ms  ({args.rounds} rounds)")
        print(f"git ckpt verify (CLI)   median {median(proc):8.1f} ms")
        print(f"git log of the events   median {median(gitlog):8.1f} ms (reading only)")


if __name__ == "__main__":
    main()
