"""Resume (all five steps) on a clean tree against `git status --porcelain`, side by side.

    .venv/bin/python benchmarks/bench_resume.py --files 10000 --rounds 7 [--pause 0.2]

Both run as processes in the same rounds, alternating which goes first:

- `git-ckpt resume t --json` through the work tree's warm daemon (its watcher
  knows nothing changed: verification is a snapshot of no changes and a tree
  compare), and the same call in its own process (`GIT_CKPT_DAEMON=off`: one
  `git status` on the private index with the expected tree as HEAD);
- `git status --porcelain` in the same repository.

Each resume writes its resume checkpoint and report, as a real one does. A call
through the daemon answers, then writes its cache files and packs after the answer
(`after_reply.py`): the next timed command waits (untimed) until that is done, so it
never shares the CPU with it, and each timed command, ours or git's, starts after
`--pause` seconds (0.2, untimed), as an agent's calls are spaced: the disk has written
back what the last one wrote. `--pause 0` gives the back-to-back figure. Prints medians (ms)
and the ratios to `git status`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_lib import (
    Series,
    alternate,
    cli_env,
    cli_path,
    git,
    make_repo,
    seal_environment,
    settle,
    start_server,
    stop_servers,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pause", type=float, default=0.2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ckpt-bench-resume-"))
    seal_environment(work)
    repo = make_repo(work, args.files)
    warm = cli_env(work, server=True)
    cold = cli_env(work, server=False)
    ckpt = cli_path()

    def call(env: dict[str, str], *argv: str) -> None:
        subprocess.run(
            [ckpt, "-C", str(repo), *argv], env=env, check=True, stdout=subprocess.DEVNULL
        )

    call(cold, "task", "start", "t", "--goal", "benchmark")
    call(cold, "create", "-t", "t", "-m", "the checkpoint to resume from")
    start_server(warm, repo)
    for _ in range(2):  # warm-up: the watcher's first walk and first (full) snapshot
        call(warm, "resume", "t", "--json")
    served, own, status = Series(), Series(), Series()

    def served_resume() -> None:
        time.sleep(args.pause)
        served.add(lambda: call(warm, "resume", "t", "--json"))
        settle(warm, repo)

    def git_status() -> None:
        time.sleep(args.pause)
        status.add(lambda: git(repo, "status", "--porcelain"))

    def own_resume() -> None:
        time.sleep(args.pause)
        own.add(lambda: call(cold, "resume", "t", "--json"))

    # The daemon's rounds first: a call in its own process writes the private index,
    # and the daemon's next snapshot then scans in full (it no longer knows that index).
    for i in range(args.rounds):
        alternate(
            i,
            served_resume,
            git_status,
        )
    for i in range(args.rounds):
        alternate(
            i,
            own_resume,
            git_status,
        )
    scans = (repo / ".git" / "agent" / "watch.log").read_text().count("full scan")
    stop_servers(warm, work)
    print(f"| resume, clean tree, {args.files} files | median ms | ours / git status |")
    print("|---|---|---|")
    for name, series in (
        ("git ckpt resume, daemon warm", served),
        ("git ckpt resume, own process", own),
        ("git status --porcelain", status),
    ):
        print(f"| {name} | {series.med:.1f} | {series.med / status.med:.2f} |")
    print(f"\nfull scans logged: {scans} (the warm-up's)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.exit(main())
