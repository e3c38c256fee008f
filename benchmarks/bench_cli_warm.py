"""A full checkpoint through the CLI and the work tree's warm daemon, against git's plumbing.

    .venv/bin/python benchmarks/bench_cli_warm.py --files 10000 --rounds 11 [--pause 0.2]

Each round modifies 10 tracked files and adds 5 new ones (`Mutator`), then runs,
alternating which goes first:

- ours: `git-ckpt -C repo create -t t` as a process, served by the daemon (started
  first, so no timed call runs cold; its watcher knows what changed);
- git: `add -A` on a persistent private index + `write-tree` + `commit-tree` +
  `update-ref` (`bench_lib.GitCheckpoint`).

Then `git-ckpt list` through the daemon (the fixed cost of a warm call). Between
rounds the script sleeps `--pause` seconds, as an agent's calls are spaced: the
work a daemon child leaves for after the answer (packing) then runs on its own,
not under the next call. `--pause 0` gives the back-to-back figure that
`bench_peers.py` measures. Both sides run with packing on and then off
(`ckpt.packObjects`). The CLI is the one `BENCH_CLI_VENV` names (see `run.sh`).
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path

from bench_lib import (
    GitCheckpoint,
    Mutator,
    Series,
    alternate,
    cli_env,
    cli_path,
    git,
    make_repo,
    run_cli,
    seal_environment,
    start_server,
    stop_servers,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--pause", type=float, default=0.2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ckpt-bench-cli-"))
    seal_environment(work)
    repo = make_repo(work, args.files)
    warm = cli_env(work, server=True)
    ckpt = cli_path()

    def call(*argv: str) -> None:
        run_cli([ckpt, "-C", str(repo), *argv], warm)

    call("task", "start", "t", "--goal", "benchmark")
    start_server(warm, repo)
    gck = GitCheckpoint(repo, ref="refs/bench/cli-warm")
    mut = Mutator(repo, args.files, n_modify=10, n_new=5)
    for _ in range(3):  # warm-up: the watcher's first (full) snapshot
        mut.step()
        call("create", "-t", "t")
    print(
        f"| {args.files} files, pause {args.pause} s | ours ms | git ms | ours / git | `list` ms |"
    )
    print("|---|---|---|---|---|")
    for pack in ("true", "false"):
        git(repo, "config", "ckpt.packObjects", pack)
        ours, theirs, listed = Series(), Series(), Series()
        for i in range(args.rounds):
            mut.step()
            alternate(
                i,
                functools.partial(ours.add, functools.partial(call, "create", "-t", "t")),
                functools.partial(theirs.add, gck.run),
            )
            time.sleep(args.pause)
            listed.add(lambda: call("list"))
            time.sleep(args.pause)
        print(
            f"| packing {'on' if pack == 'true' else 'off'} | {ours.med:.1f} | {theirs.med:.1f} "
            f"| {ours.med / theirs.med:.2f} | {listed.med:.1f} |"
        )
    stop_servers(warm, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
