"""`check` with nothing changed: the proof that nothing changed since the last snapshot
(`git/unchanged.py`: one `git ls-files -m -d -o` on the private index) against the full
snapshot `check` took before (`add -A` + `write-tree` on the private index), in the same
run, interleaved, on a clean tree of N files.

    .venv/bin/python benchmarks/bench_no_work_twice.py --files 10000
    .venv/bin/python benchmarks/bench_no_work_twice.py --files 100000 --rounds 9
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lib import make_repo, seal_environment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ckpt-bench-nwt-"))
    try:
        seal_environment(root)
        repo_path = make_repo(root, args.files)
        import git_agentckpt
        from git_agentckpt.git import worktree

        ck = git_agentckpt.open(str(repo_path))
        repo, secret = ck.repo, ck.settings.secret_paths
        head = repo.head()
        assert head is not None
        base = repo.read_commit(head).tree
        worktree.snapshot_and_changes(repo, secret, base)  # warm: the last snapshot
        full: list[float] = []
        proof: list[float] = []
        for i in range(args.rounds):
            for which in (0, 1) if i % 2 == 0 else (1, 0):
                t0 = time.perf_counter()
                if which == 0:
                    worktree.snapshot_and_changes(repo, secret, base)
                    full.append(time.perf_counter() - t0)
                else:
                    _, _, reused = worktree.snapshot_unless_unchanged(repo, secret, base)
                    proof.append(time.perf_counter() - t0)
                    assert reused, "the proof failed on an unchanged tree"
        f, p = statistics.median(full) * 1000, statistics.median(proof) * 1000
        print(
            f"| {args.files} files | full snapshot {f:.1f} ms | unchanged proof {p:.1f} ms "
            f"| {p / f:.2f}× | medians of {args.rounds}, interleaved |"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
