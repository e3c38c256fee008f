"""Full checkpoints in O(changes): ours with the work-tree watcher against git's plumbing.

    .venv/bin/python benchmarks/bench_incremental.py --files 250000 --rounds 7

Each round modifies 10 tracked files and adds 5 new ones, then runs, alternating
which goes first (both see the same changes):

- ours: `Checkpointer.create` in-process with a `TreeWatcher` active, as in a
  daemon child: the changed files written into the last tree (`git/direct_tree.py`;
  git's `update-index` on the changed paths + `write-tree` where it must), the
  commit and the ref moves, timed to the answer; the packing of loose objects that
  a daemon child does after the answer (`after_reply.py`) is timed on its own row;
- ours without the watcher: the full scan (`add -A` of the whole tree);
- git: `add -A` on a persistent private index + `write-tree` + `commit-tree` +
  `update-ref`.

Prints medians (ms) and the ratios ours / git, and with `--profile` where the
watcher path spends its time (`GIT_TRACE2_PERF` regions of its `git add`).
`--repo PATH` reuses a repository made by an earlier run (`--keep`).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from pathlib import Path

from bench_lib import GitCheckpoint, Mutator, Series, alternate, make_repo, seal_environment


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ckpt-bench-incr-"))
    seal_environment(work)
    from git_agentckpt import after_reply
    from git_agentckpt.api import Checkpointer
    from git_agentckpt.daemon import watcher
    from git_agentckpt.daemon.barrier import InProcess
    from git_agentckpt.git import watch_view

    repo = args.repo or make_repo(work, args.files)
    print(f"[bench] repository {repo} ({args.files} files)", file=sys.stderr)
    ck = Checkpointer.open(str(repo))
    if "bench" not in [str(t) for t in ck.tasks()]:
        ck.task_start("bench", goal="benchmark")
    gck = GitCheckpoint(repo, ref=f"refs/bench/incr-{os.getpid()}")
    mut = Mutator(repo, args.files, n_modify=10, n_new=5)
    live = watcher.TreeWatcher(str(repo), str(repo / ".git" / "agent"))
    live.start()
    live.finish_walk()
    watch_view.activate(InProcess(live))
    mut.step()
    ck.create(task="bench", message="warm-up: the first snapshot scans in full", light=False)
    gck.run()
    ours, full, theirs, tidy = Series(), Series(), Series(), Series()
    after_reply.defer_in_this_process()  # as a daemon child: packing after the answer
    for i in range(args.rounds):
        mut.step()
        a = functools.partial(ck.create, task="bench", message=f"r{i}", light=False)
        alternate(i, functools.partial(ours.add, a), functools.partial(theirs.add, gck.run))
        tidy.add(after_reply.run_queued)  # not in `ours`: the caller has its answer
    after_reply.stop_deferring()
    watch_view.activate(None)
    for i in range(max(3, args.rounds // 2)):
        mut.step()
        b = functools.partial(ck.create, task="bench", message=f"f{i}", light=False)
        alternate(i, functools.partial(full.add, b), functools.partial(theirs.add, gck.run))
    scans = watch_view.read_log(str(repo / ".git" / "agent"), 50)
    print(f"| {args.files} files, 10 modified + 5 added | median ms | CPU ms | ours / git |")
    print("|---|---|---|---|")
    for name, series in (
        ("ours, watcher (to the answer)", ours),
        ("ours, watcher: packing after the answer", tidy),
        ("ours, full scan", full),
        ("git plumbing", theirs),
    ):
        print(
            f"| {name} | {series.med:.1f} | {series.cpu_med:.1f} | {series.med / theirs.med:.2f} |"
        )
    print(f"\nfull scans logged: {sum('full scan' in line for line in scans)} (the warm-up's)")
    if not args.keep and args.repo is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept: {repo}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
