"""Cost of `tree_check.check_tree` (the check before restore/rollback writes a tree).

Builds a synthetic tree of N files (default 100,000: 100 dirs x 20 subdirs x 50
files (--per-dir), every tree object distinct, 1 symbolic link per subdir) and times:

- cold: a first check in the process (every tree object read and parsed);
- one file changed: a tree differing from a checked one by one file (only the
  trees on that path are new, the others are remembered by id);
- warm: the same tree again;
- `git ls-tree -r -t` of the same tree, for scale (git reading every tree).

    .venv/bin/python benchmarks/bench_tree_check.py [--files N] [--per-dir F] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_lib import seal_environment


def build(repo_dir: Path, files: int, per_dir: int = 50) -> tuple[str, str]:
    """The big tree, and the same tree with one file changed."""
    from git_agentckpt.git.repo import GitRepo

    subprocess.run(["git", "init", "-q", str(repo_dir)], check=True)
    repo = GitRepo.discover(str(repo_dir))
    blob = repo.write_blob(b"content\n")
    other = repo.write_blob(b"changed\n")
    subdirs = 20
    tops = max(1, files // (per_dir * subdirs))
    top_entries: dict[str, tuple[str, int]] = {}
    changed_top: dict[str, tuple[str, int]] = {}
    for t in range(tops):
        sub_entries: dict[str, tuple[str, int]] = {}
        for s in range(subdirs):
            names = {f"f{t}_{s}_{i}.py": (blob, 0o100644) for i in range(per_dir)}
            names["link"] = (repo.write_blob(b"../" + f"s{(s + 1) % subdirs}".encode()), 0o120000)
            sub_entries[f"s{s}"] = (repo.write_tree(names), 0o040000)
            if t == 0 and s == 0:
                names[f"f{t}_{s}_0.py"] = (other, 0o100644)
                changed_sub = repo.write_tree(names)
        top_entries[f"d{t}"] = (repo.write_tree(sub_entries), 0o040000)
        if t == 0:
            changed_top[f"d{t}"] = (
                repo.write_tree({**sub_entries, "s0": (changed_sub, 0o040000)}),
                0o040000,
            )
    root = repo.write_tree(top_entries)
    return root, repo.write_tree({**top_entries, **changed_top})


def timed(fn: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-dir", type=int, default=50, help="files per directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-tree-") as tmp:
        seal_environment(Path(tmp))
        from git_agentckpt.git import tree_check
        from git_agentckpt.git.repo import GitRepo

        repo_dir = Path(tmp) / "repo"
        root, changed = build(repo_dir, args.files, args.per_dir)
        repo = GitRepo.discover(str(repo_dir))
        dest = str(repo_dir)

        def cold() -> None:
            tree_check._memo.clear()
            tree_check.check_tree(repo, root, dest, "bench")

        def one_changed() -> None:
            tree_check._memo.clear()
            tree_check.check_tree(repo, root, dest, "bench")
            start = time.perf_counter()
            tree_check.check_tree(repo, changed, dest, "bench")
            one_changed.last = time.perf_counter() - start  # type: ignore[attr-defined]

        rows = {"cold": timed(cold, args.rounds)}
        incremental = []
        for _ in range(args.rounds):
            one_changed()
            incremental.append(one_changed.last)  # type: ignore[attr-defined]
        rows["one file changed (after a check of the tree)"] = statistics.median(incremental)
        rows["warm (same tree again)"] = timed(
            lambda: tree_check.check_tree(repo, root, dest, "bench"), args.rounds
        )
        rows["git ls-tree -r -t (for scale)"] = timed(
            lambda: subprocess.run(
                ["git", "ls-tree", "-r", "-t", root], cwd=repo_dir, capture_output=True, check=True
            ),
            args.rounds,
        )
        trees = subprocess.run(
            ["git", "ls-tree", "-r", "-t", root], cwd=repo_dir, capture_output=True, check=True
        ).stdout.count(b" tree ")
        print(
            f"check_tree on {args.files:,} files ({trees + 1:,} tree objects), "
            f"python {sys.version.split()[0]}"
        )
        for name, seconds in rows.items():
            print(f"  {name:48s} {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
