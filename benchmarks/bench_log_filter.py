"""`git ckpt log` with filters and `git ckpt timeline` on a long log (issue 14).

    .venv/bin/python benchmarks/bench_log_filter.py                  # 100k events
    .venv/bin/python benchmarks/bench_log_filter.py --events 10000 --rounds 5

One task, one event per commit as `git ckpt event` writes them: 60% `tool.call`,
20% `model.call` (with token usage), 20% `file.write`, over three steps. Each row
runs the real CLI in a process of its own (no daemon) with its output to /dev/null:
median wall time and the child's peak RSS (`bench_history.child`). Not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_history import child
from bench_lib import cli_env, cli_path, git, median, seal_environment


def build(root: Path, n: int) -> Path:
    import git_agentckpt
    from git_agentckpt.model import NewEvent
    from git_agentckpt.store.refs import TaskName

    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    ck = git_agentckpt.open(str(repo))
    ck.task_start("t", "a long task", [("s1", "read"), ("s2", "change"), ("s3", "run")])
    t = TaskName("t")
    for i in range(n):
        step = ("s1", "s2", "s3")[i * 3 // n]
        kind = ("tool.call", "tool.call", "tool.call", "model.call", "file.write")[i % 5]
        data = {"usage": {"input_tokens": 1000 + i, "output_tokens": 200}} if i % 5 == 3 else {}
        ev = NewEvent(kind, {"agent": "bench"}, f"cmd {i}", "ok", {"step": step}, data)
        ck.log.append(t, [ev])
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-logf-") as tmp:
        root = Path(tmp)
        seal_environment(root)
        repo = build(root, args.events)
        env = cli_env(root, server=False)
        exe = cli_path()
        page = str(root / "t.html")
        rows = [
            ("log", ["log", "t"]),
            ("log --json", ["log", "t", "--json"]),
            ("log --type tool.call", ["log", "t", "--type", "tool.call"]),
            ("log --type model. --step s2", ["log", "t", "--type", "model.", "--step", "s2"]),
            ("log --json --type tool.call", ["log", "t", "--json", "--type", "tool.call"]),
            ("log -n 10 --type model.call", ["log", "t", "-n", "10", "--type", "model.call"]),
            ("log -n 10", ["log", "t", "-n", "10"]),
            ("timeline --html", ["timeline", "t", "--html", page]),
        ]
        child([exe, "-C", str(repo), "log", "t", "-n", "1"], env, repo)  # bytecode cached
        print(f"{args.events} events, {args.rounds} rounds, median wall ms / peak RSS MiB")
        print("| command | ms | MiB |\n|---|---:|---:|")
        for name, argv in rows:
            runs = [child([exe, "-C", str(repo), *argv], env, repo) for _ in range(args.rounds)]
            ms = median([r[0] for r in runs])
            mib = max(r[1] for r in runs) / 1024
            print(f"| `git ckpt {name}` | {ms:.0f} | {mib:.1f} |", flush=True)
        ref = "refs/agent/events/t"
        runs = [child(["git", "log", "--format=%B", ref], env, repo) for _ in range(args.rounds)]
        ms, mib = median([r[0] for r in runs]), max(r[1] for r in runs) / 1024
        print(f"| `git log --format=%B` (reference) | {ms:.0f} | {mib:.1f} |")
        size = os.path.getsize(page)
        print(f"timeline page: {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
